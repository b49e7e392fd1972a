"""Serving a corpus folder over HTTP: in the foreground, or on a background thread.

:func:`serve_until_interrupted` loads a folder (see ``corpus.py`` for the
layout), binds it (loopback by default) and serves until Ctrl-C; the command
line (``python -m taguru_eval serve``) is a thin shell over it. With a ready
file (``--ready-file``) it writes ``{"url": …, "pid": …}`` there once uvicorn
reports itself started and removes it on the way out (``_base/ready.py``).
:func:`running_server` does the same on an ephemeral port in a background
thread for tests, benchmarks and the demo.

Both run uvicorn under :class:`ServeLimits`: a deadline for a request's line
and headers (uvicorn has no such option, so :func:`header_deadline_protocol`
adds one to its h11 protocol), a budget of its own for connections that have
not yet sent a complete request head (past it the oldest of them is closed, so
idle sockets cannot crowd out clients that send requests), a ceiling on
connections (``limit_concurrency``: past it uvicorn answers 503) and the listen
backlog.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Final

import h11
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from taguru_eval._base import signals
from taguru_eval._base.ready import (
    ReadyFile,
    remove_ready_file,
    remove_stale_ready_file,
    write_ready_file,
)
from taguru_eval.errors import InputError, RunError, os_error_text
from taguru_refserver.app import create_app
from taguru_refserver.corpus import load_corpus_dir
from taguru_refserver.state import ServerState

LOOPBACK: Final = "127.0.0.1"
_STARTUP_SECONDS = 10.0


@dataclass(frozen=True)
class ServeLimits:
    """How much a client may hold of the server.

    ``header_timeout``: seconds from connecting (or from the first byte of a
    later request on a kept-alive connection) until the request line and
    headers are complete; past it the connection is closed. ``max_connections``
    is uvicorn's ``limit_concurrency``: a request arriving while that many
    connections are open is answered 503. ``backlog``: connections the kernel
    queues before accept. ``keep_alive``: uvicorn's idle timeout between
    requests. ``headless_connections``: how many connections that have not yet
    sent a complete request head may be open at once; one accepted past it
    closes the oldest of them. It is well under ``max_connections``, so idle or
    trickling sockets, however many, leave the ceiling to connections that send
    requests (``/health`` stays 200 under 520 idle sockets).
    """

    header_timeout: float = 10.0
    max_connections: int = 512
    backlog: int = 2048
    keep_alive: int = 5
    headless_connections: int = 128


DEFAULT_LIMITS: Final = ServeLimits()


class _HeaderDeadlineH11(H11Protocol):
    """uvicorn's h11 protocol plus a deadline on each request's head (slowloris),
    and a budget for connections that have not sent one.

    uvicorn's keep-alive timer starts only after a response and any received
    byte cancels it, so a client trickling a request line or headers held its
    connection forever. The deadline is armed while h11 reports the client's
    side ``IDLE`` (no complete request head yet): from connecting, and from the
    first byte of each later request; a completed head disarms it.

    Every connection counts towards uvicorn's ``limit_concurrency`` from the
    moment it is accepted, so 520 idle sockets made every request a 503 until
    their deadline. A connection is *headless* from its accept until its first
    complete request head; at most ``headless_budget`` are kept (a record per
    server, oldest first), and one accepted past it closes the oldest. A client
    that sends its request at once is never the oldest; one that has been served
    is never headless again (between requests keep-alive's timer governs it).
    Only the asyncio.Protocol callbacks are overridden, and h11's public state is read.
    """

    header_timeout: ClassVar[float] = DEFAULT_LIMITS.header_timeout
    headless_budget: ClassVar[int] = DEFAULT_LIMITS.headless_connections
    headless: ClassVar[dict[_HeaderDeadlineH11, None]] = {}
    """This server's headless connections, oldest first (a dict keeps its order)."""
    _taguru_transport: asyncio.Transport | None = None
    _taguru_deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._taguru_transport = transport
        self._arm()  # the first request's head is due from the moment of connecting
        headless = type(self).headless
        while len(headless) >= self.headless_budget:
            oldest = next(iter(headless))
            del headless[oldest]
            oldest._close()
        headless[self] = None

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self.conn.their_state is h11.IDLE:
            if self._taguru_deadline is None:  # the first byte of a later request
                self._arm()
        else:
            self._disarm()
            type(self).headless.pop(self, None)  # a request head: headless no more

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        type(self).headless.pop(self, None)
        super().connection_lost(exc)

    def _close(self) -> None:
        transport = self._taguru_transport
        if transport is not None and not transport.is_closing():
            transport.close()

    def _arm(self) -> None:
        loop = asyncio.get_running_loop()
        self._taguru_deadline = loop.call_later(self.header_timeout, self._expire)

    def _disarm(self) -> None:
        if self._taguru_deadline is not None:
            self._taguru_deadline.cancel()
            self._taguru_deadline = None

    def _expire(self) -> None:
        self._taguru_deadline = None
        transport = self._taguru_transport
        idle = self.conn.their_state is h11.IDLE  # the head is still incomplete
        if idle and transport is not None and not transport.is_closing():
            transport.close()


def header_deadline_protocol(
    header_timeout: float, headless_connections: int = DEFAULT_LIMITS.headless_connections
) -> type[H11Protocol]:
    """uvicorn's h11 protocol (passed as ``Config(http=...)``) closing connections
    whose request head is not complete within ``header_timeout`` seconds, and the
    oldest headless one past ``headless_connections``; a class per server, so
    each server keeps its own record."""

    class Protocol(_HeaderDeadlineH11):
        pass

    Protocol.header_timeout = header_timeout
    Protocol.headless_budget = max(1, headless_connections)
    Protocol.headless = {}
    return Protocol


def bind_socket(host: str, port: int, backlog: int = DEFAULT_LIMITS.backlog) -> socket.socket:
    """A listening TCP socket on ``host:port`` (IPv4 or IPv6 by what the host is)."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    family, kind, proto, _, address = infos[0]
    sock = socket.socket(family, kind, proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(address)
        sock.listen(backlog)
    except OSError:
        sock.close()
        raise
    return sock


def socket_url(sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}"


def client_url(sock: socket.socket) -> str:
    """The URL a client on this machine reaches ``sock`` by: its address, except
    that a wildcard bind (``0.0.0.0``, ``::``) is reached over loopback."""
    host, port = sock.getsockname()[:2]
    with contextlib.suppress(ValueError):
        address = ipaddress.ip_address(host)
        if address.is_unspecified:
            host = "127.0.0.1" if address.version == 4 else "::1"
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}"


def check_ready_file(path: Path) -> None:
    """Refuse (``InputError``, exit 2) a ready-file path that could never be
    written — its directory missing, or the path a directory — before anything
    binds, rather than after the server is up."""
    if not path.parent.is_dir():
        raise InputError(f"--ready-file {path}: directory {path.parent} does not exist")
    if path.is_dir():
        raise InputError(f"--ready-file {path}: is a directory")


def _uvicorn_server(
    state: ServerState, token: str | None, read_token: str | None, limits: ServeLimits
) -> uvicorn.Server:
    app = create_app(state, token=token, read_token=read_token)
    config = uvicorn.Config(
        app,
        log_level="warning",
        lifespan="off",
        access_log=False,
        http=header_deadline_protocol(limits.header_timeout, limits.headless_connections),
        limit_concurrency=limits.max_connections,
        backlog=limits.backlog,  # for uvicorn's own binding; ours listens with it too
        timeout_keep_alive=limits.keep_alive,
    )
    return uvicorn.Server(config)


def serve_until_interrupted(
    corpus_dir: Path,
    *,
    host: str,
    port: int,
    token: str | None,
    read_token: str | None,
    announce: Callable[[str], None],
    vector_lane: bool = False,
    reranker: bool = False,
    limits: ServeLimits = DEFAULT_LIMITS,
    ready_file: Path | None = None,
    jitter: int | None = None,
) -> None:
    """Load ``corpus_dir`` and serve it on ``host:port`` until Ctrl-C.

    ``announce`` receives the URL line once uvicorn accepts connections. A bad
    corpus folder raises ``InputError``; a port that cannot be bound, ``OSError``.
    ``vector_lane`` and ``reranker`` turn on the toy vector lane and reranker;
    ``jitter`` seeds the random order of tied hits (:class:`ServerState`).
    ``ready_file``, when given, is written (:class:`ReadyFile`, atomically) at
    the same moment and removed when serving ends, however it ends; one an
    earlier server left is removed first. A ready file that cannot be written
    stops the server with ``RunError``.
    """
    if ready_file is not None:
        check_ready_file(ready_file)
        try:
            remove_stale_ready_file(ready_file)
        except OSError as exc:
            raise InputError(f"--ready-file {ready_file}: {os_error_text(exc)}") from None
    state = ServerState(vector_lane=vector_lane, reranker=reranker, jitter=jitter)
    names = load_corpus_dir(state, corpus_dir)
    sock = bind_socket(host, port, limits.backlog)
    server = _uvicorn_server(state, token, read_token, limits)
    served = ", ".join(names) if names else "none yet"
    ready = _Ready(ready_file, ReadyFile(client_url(sock), os.getpid())) if ready_file else None
    try:
        asyncio.run(
            _serve_announcing(
                server,
                sock,
                f"listening on {socket_url(sock)} (contexts: {served})",
                announce,
                ready,
            )
        )
    except KeyboardInterrupt:
        pass
    finally:
        # uvicorn handles SIGINT and SIGTERM while it serves and hands them on once
        # it has stopped: for serve, being stopped is the normal end (exit 0).
        signals.consume()
        if ready is not None:
            ready.remove()
        sock.close()


@dataclass
class _Ready:
    """A ready file to write once serving, and what was written (to remove it)."""

    path: Path
    content: ReadyFile
    written: bytes | None = None

    def write(self) -> None:
        try:
            self.written = write_ready_file(self.path, self.content)
        except OSError as exc:
            raise RunError(
                f"cannot write the ready file {self.path}: {os_error_text(exc)}"
            ) from None

    def remove(self) -> None:
        if self.written is not None:
            remove_ready_file(self.path, self.written)


async def _serve_announcing(
    server: uvicorn.Server,
    sock: socket.socket,
    line: str,
    announce: Callable[[str], None],
    ready: _Ready | None = None,
) -> None:
    """Serve, writing the ready file and printing ``line`` once uvicorn accepts
    connections.

    ``Server.started`` is uvicorn's public flag, set at the end of its startup:
    the listening socket is being served by then (``lifespan`` is off, so there
    is no startup hook the app could still be waiting on), so a ``/health`` sent
    after it is answered. A ready file that cannot be written stops the server
    (and is raised once it has stopped).
    """
    task = asyncio.create_task(server.serve(sockets=[sock]))
    while not server.started and not task.done():
        await asyncio.sleep(0.01)
    if server.started:
        if ready is not None:
            try:
                ready.write()
            except RunError:
                server.should_exit = True
                await task
                raise
        announce(line)
    await task


@contextmanager
def running_server(
    corpus_dir: Path | None,
    *,
    port: int = 0,
    token: str | None = None,
    read_token: str | None = None,
    vector_lane: bool = False,
    reranker: bool = False,
    limits: ServeLimits = DEFAULT_LIMITS,
    jitter: int | None = None,
) -> Iterator[str]:
    """Serve ``corpus_dir`` (or nothing) on 127.0.0.1 in a background thread; yield its URL.

    ``vector_lane`` and ``reranker`` are the ``--vector-lane`` and
    ``--reranker`` switches of ``serve``, ``jitter`` its ``--jitter SEED``;
    ``limits`` as :class:`ServeLimits`. The server is stopped and its thread
    joined when the block exits.
    """
    state = ServerState(vector_lane=vector_lane, reranker=reranker, jitter=jitter)
    if corpus_dir is not None:
        load_corpus_dir(state, corpus_dir)
    sock = bind_socket(LOOPBACK, port, limits.backlog)
    server = _uvicorn_server(state, token, read_token, limits)
    thread = threading.Thread(
        target=server.run, kwargs={"sockets": [sock]}, name="taguru-refserver", daemon=True
    )
    thread.start()
    try:
        deadline = time.monotonic() + _STARTUP_SECONDS
        # The socket already listens, so early connections queue; this wait only
        # turns a server that failed to start into an error instead of a hang.
        while not server.started:
            if not thread.is_alive() or time.monotonic() > deadline:
                raise RunError("the reference server did not start")
            time.sleep(0.005)
        yield socket_url(sock)
    finally:
        server.should_exit = True
        thread.join(timeout=_STARTUP_SECONDS)
        sock.close()

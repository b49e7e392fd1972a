"""Serving a corpus folder over HTTP: in the foreground, or on a background thread.

:func:`serve_until_interrupted` loads a folder (see ``corpus.py`` for the
layout), binds it (loopback by default) and serves until Ctrl-C; the command
line (``python -m taguru_eval serve``) is a thin shell over it.
:func:`running_server` does the same on an ephemeral port in a background
thread for tests, benchmarks and the demo.
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Final

import uvicorn

from taguru_eval.errors import RunError
from taguru_eval.refserver.app import create_app
from taguru_eval.refserver.corpus import load_corpus_dir
from taguru_eval.refserver.state import ServerState

LOOPBACK: Final = "127.0.0.1"
_STARTUP_SECONDS = 10.0


def bind_socket(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host:port`` (IPv4 or IPv6 by what the host is)."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    family, kind, proto, _, address = infos[0]
    sock = socket.socket(family, kind, proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(address)
        sock.listen(2048)
    except OSError:
        sock.close()
        raise
    return sock


def socket_url(sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}"


def _uvicorn_server(
    state: ServerState, token: str | None, read_token: str | None
) -> uvicorn.Server:
    app = create_app(state, token=token, read_token=read_token)
    config = uvicorn.Config(app, log_level="warning", lifespan="off", access_log=False)
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
) -> None:
    """Load ``corpus_dir`` and serve it on ``host:port`` until Ctrl-C.

    ``announce`` receives the URL line once uvicorn accepts connections. A bad
    corpus folder raises ``InputError``; a port that cannot be bound, ``OSError``.
    ``vector_lane`` and ``reranker`` turn on the toy vector lane and reranker.
    """
    state = ServerState(vector_lane=vector_lane, reranker=reranker)
    names = load_corpus_dir(state, corpus_dir)
    sock = bind_socket(host, port)
    server = _uvicorn_server(state, token, read_token)
    served = ", ".join(names) if names else "none yet"
    try:
        asyncio.run(
            _serve_announcing(
                server, sock, f"listening on {socket_url(sock)} (contexts: {served})", announce
            )
        )
    except KeyboardInterrupt:
        pass
    finally:
        sock.close()


async def _serve_announcing(
    server: uvicorn.Server, sock: socket.socket, line: str, announce: Callable[[str], None]
) -> None:
    """Serve, printing ``line`` once uvicorn accepts connections."""
    task = asyncio.create_task(server.serve(sockets=[sock]))
    while not server.started and not task.done():
        await asyncio.sleep(0.01)
    if server.started:
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
) -> Iterator[str]:
    """Serve ``corpus_dir`` (or nothing) on 127.0.0.1 in a background thread; yield its URL.

    ``vector_lane`` and ``reranker`` are the ``--vector-lane`` and
    ``--reranker`` switches of ``serve``. The server is stopped and its thread
    joined when the block exits.
    """
    state = ServerState(vector_lane=vector_lane, reranker=reranker)
    if corpus_dir is not None:
        load_corpus_dir(state, corpus_dir)
    sock = bind_socket(LOOPBACK, port)
    server = _uvicorn_server(state, token, read_token)
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

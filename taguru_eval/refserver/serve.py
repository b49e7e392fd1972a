"""``python -m taguru_eval serve DIR``: serve a corpus folder over HTTP, and a test helper.

``main`` loads DIR (see ``corpus.py`` for the layout), binds loopback by
default, prints the URL it listens on and serves until interrupted.
``running_server`` does the same on an ephemeral port in a background thread
for tests and the demo.
"""

from __future__ import annotations

import asyncio
import socket
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import uvicorn

from taguru_eval.errors import EXIT_INPUT, EXIT_OK, EXIT_RUN_FAILED, InputError, RunError
from taguru_eval.refserver.app import create_app
from taguru_eval.refserver.corpus import load_corpus_dir
from taguru_eval.refserver.state import ServerState

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8248
PROGRAM = "taguru_eval serve"
USAGE = (
    "usage: python -m taguru_eval serve DIR [--host 127.0.0.1] [--port 8248] "
    "[--token T] [--read-token T] [--vector-lane] [--reranker]"
)
HELP = f"""{USAGE}

Serve every context folder under DIR (one sub-folder per context, named after it)
with a taguru-compatible HTTP API. An empty DIR serves nothing until contexts are
created over HTTP.

  --host HOST        address to bind (default 127.0.0.1, loopback only)
  --port PORT        port to bind (default 8248; 0 picks a free one)
  --token T          bearer token with read-write access
  --read-token T     bearer token with read-only access (enough for evaluate)
  --vector-lane      give every context the toy vector lane (model
                     refserver-toy-hash-v1; a context folder can opt in alone
                     with "vector_lane": true in its context.json)
  --reranker         configure the toy evidence reranker (refserver-toy-rerank-v1)

Without a token, the server is open, as taguru is. Without --vector-lane the
vector lane reports "no embedding provider is configured", as taguru does
without a provider; without --reranker a requested rerank reports not_configured.
"""
_STARTUP_SECONDS = 10.0
_FLAGS = ("--host", "--port", "--token", "--read-token")
_SWITCHES = ("--vector-lane", "--reranker")


@dataclass(frozen=True)
class ServeOptions:
    corpus_dir: Path
    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    token: str | None = None
    read_token: str | None = None
    vector_lane: bool = False
    reranker: bool = False


def parse_args(argv: list[str]) -> ServeOptions | None:
    """The options of ``serve``; None for ``--help``. Raises ``InputError`` (exit 2)."""
    values: dict[str, str] = {}
    switches: set[str] = set()
    positional: list[str] = []
    index = 0
    while index < len(argv):
        arg = argv[index]
        index += 1
        if arg in ("-h", "--help"):
            return None
        if arg in _SWITCHES:
            if arg in switches:
                raise InputError(f"{arg} given twice")
            switches.add(arg)
        elif arg.startswith("--"):
            flag, eq, inline = arg.partition("=")
            if flag in _SWITCHES:
                raise InputError(f"{flag} takes no value")
            if flag not in _FLAGS:
                raise InputError(f"unknown flag '{flag}' for serve")
            if flag in values:
                raise InputError(f"{flag} given twice")
            if eq:
                values[flag] = inline
            elif index < len(argv):
                values[flag] = argv[index]
                index += 1
            else:
                raise InputError(f"{flag} needs a value")
        else:
            positional.append(arg)
    if len(positional) != 1:
        raise InputError("serve needs exactly one DIR (the corpus folder)")
    port_text = values.get("--port", str(DEFAULT_PORT))
    if not port_text.isascii() or not port_text.isdigit() or int(port_text) > 65535:
        raise InputError(f"--port must be an integer in 0..65535 (got {port_text!r})")
    host = values.get("--host", DEFAULT_HOST)
    if not host:
        raise InputError("--host must not be empty")
    return ServeOptions(
        corpus_dir=Path(positional[0]),
        host=host,
        port=int(port_text),
        token=values.get("--token") or None,
        read_token=values.get("--read-token") or None,
        vector_lane="--vector-lane" in switches,
        reranker="--reranker" in switches,
    )


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


def main(argv: list[str]) -> int:
    """Run ``serve``; 0 after a clean shutdown, 2 for a bad DIR or flag, 1 if binding fails."""
    try:
        options = parse_args(argv)
        if options is None:
            print(HELP, end="")
            return EXIT_OK
        state = ServerState(vector_lane=options.vector_lane, reranker=options.reranker)
        names = load_corpus_dir(state, options.corpus_dir)
    except InputError as error:
        print(f"{PROGRAM}: {error}", file=sys.stderr)
        return EXIT_INPUT
    try:
        sock = bind_socket(options.host, options.port)
    except OSError as error:
        print(
            f"{PROGRAM}: cannot listen on {options.host}:{options.port}: {error.strerror or error}",
            file=sys.stderr,
        )
        return EXIT_RUN_FAILED
    server = _uvicorn_server(state, options.token, options.read_token)
    url = socket_url(sock)
    served = ", ".join(names) if names else "none yet"
    try:
        asyncio.run(
            _serve_announcing(server, sock, f"{PROGRAM}: listening on {url} (contexts: {served})")
        )
    except KeyboardInterrupt:
        pass
    finally:
        sock.close()
    return EXIT_OK


async def _serve_announcing(server: uvicorn.Server, sock: socket.socket, line: str) -> None:
    """Serve, printing ``line`` once uvicorn accepts connections."""
    task = asyncio.create_task(server.serve(sockets=[sock]))
    while not server.started and not task.done():
        await asyncio.sleep(0.01)
    if server.started:
        print(line, flush=True)
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
    sock = bind_socket(DEFAULT_HOST, port)
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


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

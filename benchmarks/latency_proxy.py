"""A loopback TCP proxy that holds every byte a client sends for a fixed delay.

Each accepted connection gets its own connection to the upstream server; what
the client sends reaches the server ``--delay-ms`` later (in order), what the
server answers goes back at once. With one request per write, every call
pays the delay once: a round trip as long as a short network hop, on one
machine. It runs as a child process (``vs_taguru.py`` reads its CPU from
``/proc``), prints ``listening on HOST:PORT`` once it accepts, and stops on
SIGTERM.

    python benchmarks/latency_proxy.py --upstream 127.0.0.1:8248 [--delay-ms 1]
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import signal
import sys
from typing import cast


class _Upstream(asyncio.Protocol):
    """The proxy's side of one upstream connection: answers go back at once."""

    def __init__(self, client: asyncio.Transport) -> None:
        self.client = client
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is no subclass

    def data_received(self, data: bytes) -> None:
        self.client.write(data)

    def connection_lost(self, exc: Exception | None) -> None:
        self.client.close()


class _Client(asyncio.Protocol):
    """One client connection: its bytes are written upstream ``delay`` seconds later."""

    def __init__(self, upstream: tuple[str, int], delay: float) -> None:
        self.upstream_address = upstream
        self.delay = delay
        self.loop = asyncio.get_running_loop()
        self.pending: collections.deque[tuple[float, bytes]] = collections.deque()
        self.timer: asyncio.TimerHandle | None = None
        self.upstream: _Upstream | None = None
        self.closing = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is no subclass
        self.transport.pause_reading()
        self.loop.create_task(self._connect())

    async def _connect(self) -> None:
        host, port = self.upstream_address
        try:
            _, upstream = await self.loop.create_connection(
                lambda: _Upstream(self.transport), host, port
            )
        except OSError:
            self.transport.close()
            return
        self.upstream = upstream
        self.transport.resume_reading()
        if self.pending and self.timer is None:  # bytes that came before the upstream did
            self.timer = self.loop.call_at(self.pending[0][0], self._release)

    def data_received(self, data: bytes) -> None:
        self.pending.append((self.loop.time() + self.delay, data))
        if self.timer is None and self.upstream is not None:
            self.timer = self.loop.call_at(self.pending[0][0], self._release)

    def _release(self) -> None:
        self.timer = None
        upstream = self.upstream.transport if self.upstream is not None else None
        if upstream is None or upstream.is_closing():
            self.pending.clear()
            self.transport.close()
            return
        now = self.loop.time()
        while self.pending and self.pending[0][0] <= now:
            upstream.write(self.pending.popleft()[1])
        if self.pending:
            self.timer = self.loop.call_at(self.pending[0][0], self._release)
        elif self.closing:
            upstream.close()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closing = True
        if not self.pending and self.upstream is not None and self.upstream.transport:
            self.upstream.transport.close()


async def serve(upstream: tuple[str, int], delay: float) -> None:
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: _Client(upstream, delay), "127.0.0.1", 0)
    host, port = server.sockets[0].getsockname()[:2]
    print(f"listening on {host}:{port}", flush=True)
    stopped = asyncio.Event()
    loop.add_signal_handler(signal.SIGTERM, stopped.set)
    await stopped.wait()
    server.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--upstream", required=True, help="HOST:PORT of the server")
    parser.add_argument("--delay-ms", type=float, default=1.0)
    args = parser.parse_args(argv)
    host, _, port = args.upstream.rpartition(":")
    try:  # the proxy's own CPU is part of the figure: the faster loop where it installs
        import uvloop

        runner = asyncio.Runner(loop_factory=uvloop.new_event_loop)
    except ImportError:
        runner = asyncio.Runner()
    with runner:
        runner.run(serve((host, int(port)), args.delay_ms / 1000))
    return 0


if __name__ == "__main__":
    sys.exit(main())

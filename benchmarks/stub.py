"""A lean taguru stub for the benchmarks: every answer after a fixed delay, little CPU of its own.

An ``asyncio.Protocol`` speaking just enough HTTP/1.1 (keep-alive,
``Content-Length`` bodies) to answer from a table of pre-encoded bodies, so
that the client's figures are the client's: the aiohttp web app the
throughput benchmark used before spent about as much CPU per request as the
client under test, on the same two cores.

Answers are looked up first by the exact request (method, percent-decoded
target, body: transports differ in what they escape) in ``exact`` — a
recording of real answers, see ``end_to_end.py`` — then by the route's name
(:func:`route_of`) in ``routes``; anything else is a taguru-style 404.

The server notes the monotonic time (the system-wide clock every process
shares) of the first and the last request it received, and serves them at
``GET /__stats`` (not counted), so a benchmark can time its network phase on
the server's clock. It runs in a child process (:class:`Stub`) and stops with
the benchmark, or by itself after ``lifetime_s``.
"""

from __future__ import annotations

import asyncio
import json
import multiprocessing
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any
from urllib.parse import unquote, urlsplit

Exact = Mapping[tuple[str, str, bytes], tuple[int, bytes]]
"""(method, target, body) -> (status, answer body): a recording of real answers."""


def route_of(method: str, target: str) -> str:
    """The name of a taguru route, from the request's method and target."""
    parts = urlsplit(target)
    segments = parts.path.strip("/").split("/")
    if segments == ["health"]:
        return "health"
    if len(segments) == 2 and segments[0] == "contexts":
        return "entry"
    last = segments[-1]
    if last == "sources" and method == "GET":
        return "sources_end" if "after=" in parts.query else "sources_first"
    if last == "search" and len(segments) >= 2 and segments[-2] == "sources":
        return f"search:{segments[1]}"
    return last  # embeddings, evidence, resolve, resolve_label, query, citations


def response(body: bytes, status: int = 200) -> bytes:
    """The whole HTTP/1.1 response for ``body``."""
    head = (
        f"HTTP/1.1 {status} {HTTPStatus(status).phrase}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


_NOT_FOUND = response(b'{"error":"no such route in the benchmark stub","code":"not_found"}', 404)


@dataclass
class _Clock:
    first: float | None = None
    last: float | None = None
    requests: int = 0
    by_route: dict[str, int] = field(default_factory=dict)
    holds: list[float] = field(default_factory=list)
    """Seconds from each request's arrival to its answer's write (``GET /__stats?reset``
    empties it)."""


class _Connection(asyncio.Protocol):
    def __init__(
        self,
        delay_s: float,
        exact: Mapping[tuple[str, str, bytes], bytes],
        routes: Mapping[str, bytes],
        clock: _Clock,
    ) -> None:
        self._delay_s = delay_s
        self._exact = exact
        self._routes = routes
        self._clock = clock
        self._buffer = b""
        self._transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport

    def data_received(self, data: bytes) -> None:
        self._buffer += data
        while True:
            end = self._buffer.find(b"\r\n\r\n")
            if end < 0:
                return
            head = self._buffer[:end].decode("latin-1").split("\r\n")
            length = 0
            for line in head[1:]:
                name, _, value = line.partition(":")
                if name.strip().lower() == "content-length":
                    length = int(value)
            if len(self._buffer) < end + 4 + length:
                return
            body = self._buffer[end + 4 : end + 4 + length]
            self._buffer = self._buffer[end + 4 + length :]
            method, target, _ = head[0].split(" ", 2)
            self._answer(method, target, body)

    def _answer(self, method: str, target: str, body: bytes) -> None:
        assert self._transport is not None
        if target.startswith("/__stats"):
            clock = self._clock
            holds = sorted(clock.holds)
            stats = {
                "first": clock.first,
                "last": clock.last,
                "requests": clock.requests,
                "by_route": clock.by_route,
                "hold_ms": {
                    name: holds[int(len(holds) * share)] * 1000 if holds else None
                    for name, share in (("p10", 0.1), ("p50", 0.5), ("p90", 0.9), ("p99", 0.99))
                },
            }
            if target.endswith("?reset"):
                clock.holds.clear()
            self._transport.write(response(json.dumps(stats).encode()))
            return
        now = time.monotonic()
        clock = self._clock
        if clock.first is None:
            clock.first = now
        clock.last = now
        clock.requests += 1
        answer = self._exact.get((method, unquote(target), body))
        route = route_of(method, target)
        clock.by_route[route] = clock.by_route.get(route, 0) + 1
        if answer is None:
            found = self._routes.get(route)
            if found is None and route.startswith("search:"):
                found = self._routes.get("search")
            answer = _NOT_FOUND if found is None else response(found)
        asyncio.get_running_loop().call_later(self._delay_s, self._write, answer, now)

    def _write(self, answer: bytes, arrived: float) -> None:
        if self._transport is not None and not self._transport.is_closing():
            self._transport.write(answer)
            self._clock.holds.append(time.monotonic() - arrived)

    def connection_lost(self, exc: Exception | None) -> None:
        self._transport = None


def _main(
    port_queue: Any,
    delay_s: float,
    exact: Exact,
    routes: Mapping[str, bytes],
    lifetime_s: float,
) -> None:
    async def serve() -> None:
        clock = _Clock()
        loop = asyncio.get_running_loop()
        server = await loop.create_server(
            lambda: _Connection(delay_s, encoded, routes, clock), "127.0.0.1", 0, backlog=2048
        )
        port_queue.put(server.sockets[0].getsockname()[1])
        async with server:
            await asyncio.sleep(lifetime_s)

    encoded = {key: response(body, status) for key, (status, body) in exact.items()}

    asyncio.run(serve())


class Stub:
    """The stub in a child process; ``url`` once started, ``stats()`` on demand."""

    def __init__(
        self,
        delay_s: float,
        routes: Mapping[str, bytes],
        exact: Exact | None = None,
        lifetime_s: float = 1800.0,
    ) -> None:
        context = multiprocessing.get_context("spawn")
        ports = context.Queue()
        self._process = context.Process(
            target=_main,
            args=(ports, delay_s, dict(exact or {}), dict(routes), lifetime_s),
            daemon=True,
        )
        self._process.start()
        self.port: int = ports.get(timeout=60)
        self.url = f"http://127.0.0.1:{self.port}"

    def stats(self, reset: bool = False) -> dict[str, Any]:
        """First and last request times (server's monotonic clock), request counts and
        the hold times' percentiles (``reset``: start a new sample of them)."""
        import urllib.request

        target = "/__stats?reset" if reset else "/__stats"
        with urllib.request.urlopen(self.url + target, timeout=10) as answer:
            stats: dict[str, Any] = json.loads(answer.read())
        return stats

    def stop(self) -> None:
        self._process.terminate()
        self._process.join(timeout=10)

    def __enter__(self) -> Stub:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

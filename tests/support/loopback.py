"""Hand-written servers on loopback for faults the reference server cannot produce.

:class:`ScriptedServer` answers every HTTP/1.1 request with whatever its
handler returns (an echoing server, an endless source listing, a redirector);
:class:`ForwardProxy` is a minimal forward proxy (absolute-form requests and
``CONNECT`` tunnels) that records what went through it; :class:`RecordingProxy`
is a reverse proxy in front of one server that keeps every exchange (request
and answer, bytes as sent); :class:`RawServer` writes whatever bytes its script
gives (malformed, chunked or cut-short responses). All run their own
event loop on a background thread, so the code under test can be the real
CLI with its real transport.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any
from urllib.parse import parse_qsl, urlsplit


@dataclass
class Request:
    """One request as the server read it."""

    method: str
    target: str
    headers: dict[str, str]
    body: bytes

    @property
    def path(self) -> str:
        return urlsplit(self.target).path

    @property
    def query(self) -> dict[str, str]:
        return dict(parse_qsl(urlsplit(self.target).query, keep_blank_values=True))

    def json(self) -> Any:
        return json.loads(self.body) if self.body else None


@dataclass
class Response:
    status: int
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)

    @classmethod
    def of_json(cls, status: int, document: object, **headers: str) -> Response:
        body = json.dumps(document, ensure_ascii=False).encode("utf-8")
        return cls(status, body, {"Content-Type": "application/json", **headers})

    @classmethod
    def of_text(cls, status: int, text: str, **headers: str) -> Response:
        return cls(status, text.encode("utf-8"), {"Content-Type": "text/plain", **headers})


def envelope(result: object) -> Response:
    return Response.of_json(200, {"result": result, "status": "ok", "time": 0.0})


def context_entry(name: str) -> dict[str, Any]:
    """A ``DirectoryEntry`` the preflight accepts (revision 1/1/0, last write 1)."""
    return {
        "name": name,
        "description": "",
        "pinned": False,
        "loaded": True,
        "stats": {},
        "usage": {"last_write_epoch": 1},
        "revision": {"graph": 1, "passages": 1, "config": 0},
    }


_REASONS = {200: "OK", 301: "Moved", 302: "Found", 303: "See Other", 307: "Temporary Redirect"}


async def _read_request(reader: asyncio.StreamReader) -> Request | None:
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except (asyncio.IncompleteReadError, ConnectionError):
        return None
    lines = head.decode("latin-1").split("\r\n")
    method, target, _version = lines[0].split(" ", 2)
    headers: dict[str, str] = {}
    for line in lines[1:]:
        if line:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
    length = int(headers.get("content-length", "0"))
    body = await reader.readexactly(length) if length else b""
    return Request(method, target, headers, body)


def _encode_response(response: Response) -> bytes:
    reason = _REASONS.get(response.status, "Status")
    head = [f"HTTP/1.1 {response.status} {reason}", f"Content-Length: {len(response.body)}"]
    head.extend(f"{name}: {value}" for name, value in response.headers.items())
    return ("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + response.body


Connection = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


class _ThreadedServer:
    """An asyncio server on 127.0.0.1:<ephemeral> run on a background thread;
    ``connection`` serves one accepted connection."""

    def __init__(self, connection: Connection) -> None:
        self._connection = connection
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopped: asyncio.Event | None = None
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self.port = 0

    async def _serve(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stopped = asyncio.Event()
        server = await asyncio.start_server(self._guarded, "127.0.0.1", 0)
        self.port = server.sockets[0].getsockname()[1]
        self._ready.set()
        async with server:
            await self._stopped.wait()

    async def _guarded(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError, asyncio.IncompleteReadError):
            await self._connection(reader, writer)
        with contextlib.suppress(Exception):
            writer.close()

    def _run(self) -> None:
        asyncio.run(self._serve())

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> str:
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("loopback server did not start")
        return self.url

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._loop is not None and self._stopped is not None:
            # A server that stopped itself has closed its loop already.
            with contextlib.suppress(RuntimeError):
                self._loop.call_soon_threadsafe(self._stopped.set)
        self._thread.join(10)


class ScriptedServer(_ThreadedServer):
    """Answers each request with ``handler(request)`` (a response, or an
    awaitable of one: a slow server awaits before answering); keeps
    connections alive unless the request asks to close."""

    def __init__(self, handler: Callable[[Request], Response | Awaitable[Response]]) -> None:
        super().__init__(self.handle)
        self.handler = handler
        self.requests: list[Request] = []

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            request = await _read_request(reader)
            if request is None:
                return
            self.requests.append(request)
            answer = self.handler(request)
            response = await answer if inspect.isawaitable(answer) else answer
            closing = request.headers.get("connection", "").lower() == "close"
            if closing:
                response.headers["Connection"] = "close"
            writer.write(_encode_response(response))
            await writer.drain()
            if closing:
                return


class ForwardProxy(_ThreadedServer):
    """A forward proxy: absolute-form requests are relayed, ``CONNECT`` is tunnelled.

    ``seen`` records each request line (``GET http://…`` or ``CONNECT host:port``)
    and whether it carried an ``Authorization`` header.
    """

    def __init__(self) -> None:
        super().__init__(self.handle)
        self.seen: list[tuple[str, str]] = []

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            request = await _read_request(reader)
            if request is None:
                return
            self.seen.append((request.method, request.target))
            if request.method == "CONNECT":
                await self._tunnel(request, reader, writer)
                return
            await self._relay(request, writer)

    async def _relay(self, request: Request, writer: asyncio.StreamWriter) -> None:
        parts = urlsplit(request.target)
        upstream_reader, upstream_writer = await asyncio.open_connection(
            parts.hostname, parts.port or 80
        )
        origin_form = parts.path + (f"?{parts.query}" if parts.query else "")
        headers = {k: v for k, v in request.headers.items() if k not in ("connection",)}
        headers["connection"] = "close"
        head = [f"{request.method} {origin_form} HTTP/1.1"]
        head.extend(f"{name}: {value}" for name, value in headers.items())
        upstream_writer.write(("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + request.body)
        await upstream_writer.drain()
        answer = await upstream_reader.read()  # the upstream closes after one response
        upstream_writer.close()
        writer.write(answer)
        await writer.drain()

    async def _tunnel(
        self, request: Request, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        host, _, port = request.target.rpartition(":")
        upstream_reader, upstream_writer = await asyncio.open_connection(host, int(port))
        writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
        await writer.drain()

        async def pipe(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
            with contextlib.suppress(ConnectionError):
                while chunk := await source.read(65536):
                    sink.write(chunk)
                    await sink.drain()
            with contextlib.suppress(Exception):
                sink.close()

        await asyncio.gather(pipe(reader, upstream_writer), pipe(upstream_reader, writer))


@dataclass(frozen=True)
class Exchange:
    """One request relayed by a :class:`RecordingProxy` and the upstream's answer."""

    method: str
    target: str
    content_type: str | None
    body: bytes
    status: int
    answer: bytes


class RecordingProxy(_ThreadedServer):
    """A reverse proxy to ``upstream`` (a base URL) that records every exchange.

    A client pointed at the proxy's URL talks to the upstream as it would
    directly: the method, target, body and ``Content-Type`` go through as sent
    (and ``Authorization``, when there is one); the answer comes back with its
    status, ``Content-Type`` and body. ``exchanges`` keeps them in arrival order.
    """

    def __init__(self, upstream: str) -> None:
        super().__init__(self.handle)
        self.upstream = upstream.rstrip("/")
        self.exchanges: list[Exchange] = []

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        import httpx

        async with httpx.AsyncClient(timeout=120) as client:
            while True:
                request = await _read_request(reader)
                if request is None:
                    return
                forwarded = {
                    name: value
                    for name, value in request.headers.items()
                    if name in ("content-type", "authorization", "accept")
                }
                answer = await client.request(
                    request.method,
                    self.upstream + request.target,
                    content=request.body or None,
                    headers=forwarded,
                )
                content_type = request.headers.get("content-type")
                self.exchanges.append(
                    Exchange(
                        request.method,
                        request.target,
                        content_type,
                        request.body,
                        answer.status_code,
                        answer.content,
                    )
                )
                headers = {}
                if "content-type" in answer.headers:
                    headers["Content-Type"] = answer.headers["content-type"]
                writer.write(
                    _encode_response(Response(answer.status_code, answer.content, headers))
                )
                await writer.drain()


@dataclass(frozen=True)
class Scripted:
    """What a :class:`RawServer` does with one request: write ``answer`` (raw bytes),
    then wait ``hang_s``, write ``then``, and close the connection when ``close``."""

    answer: bytes
    close: bool = False
    hang_s: float = 0.0
    then: bytes = b""


class RawServer(_ThreadedServer):
    """Answers each request with the raw bytes ``script(request)`` gives, for
    responses no HTTP library would write; records every request's raw bytes and
    counts the connections it accepted."""

    def __init__(self, script: Callable[[Request], Scripted]) -> None:
        super().__init__(self.handle)
        self.script = script
        self.raw: list[bytes] = []
        self.connections = 0

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        while True:
            try:
                head = await reader.readuntil(b"\r\n\r\n")
            except (asyncio.IncompleteReadError, ConnectionError):
                return
            lines = head.decode("latin-1").split("\r\n")
            method, target, _version = lines[0].split(" ", 2)
            headers = {
                name.strip().lower(): value.strip()
                for name, _, value in (line.partition(":") for line in lines[1:] if line)
            }
            length = int(headers.get("content-length", "0"))
            body = await reader.readexactly(length) if length else b""
            self.raw.append(head + body)
            scripted = self.script(Request(method, target, headers, body))
            writer.write(scripted.answer)
            await writer.drain()
            if scripted.hang_s:
                await asyncio.sleep(scripted.hang_s)
            if scripted.then:
                writer.write(scripted.then)
                await writer.drain()
            if scripted.close:
                return


class StoppingProxy(_ThreadedServer):
    """A reverse proxy in front of ``upstream`` (``host:port``) that relays the first
    ``requests`` requests and then stops as a server does: its open connections
    are closed and its port refuses new ones."""

    def __init__(self, upstream: str, requests: int) -> None:
        super().__init__(self.handle)
        host, _, port = upstream.rpartition(":")
        self._upstream = (host, int(port))
        self._left = requests
        self._writers: set[asyncio.StreamWriter] = set()
        self.relayed: list[str] = []

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.add(writer)
        upstream_reader, upstream_writer = await asyncio.open_connection(*self._upstream)
        try:
            while self._left > 0:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                body = await reader.readexactly(_content_length(head))
                self._left -= 1
                self.relayed.append(head.split(b"\r\n", 1)[0].decode("latin-1"))
                upstream_writer.write(head + body)
                await upstream_writer.drain()
                answer = await upstream_reader.readuntil(b"\r\n\r\n")
                answer += await upstream_reader.readexactly(_content_length(answer))
                writer.write(answer)
                await writer.drain()
            self._stop_serving()
        finally:
            upstream_writer.close()

    def _stop_serving(self) -> None:
        for writer in self._writers:
            writer.close()
        if self._stopped is not None:
            self._stopped.set()


def _content_length(head: bytes) -> int:
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            return int(value)
    return 0

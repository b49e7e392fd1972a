"""The run's own engine for plain ``http://`` calls: keep-alive connections on the run's loop.

Against a server on the same host, aiohttp's request machinery (its request
and response objects, a writer task per request, its timers and tracing
hooks) cost about eight times what the rest of a call costs
(``benchmarks/README.md``, "The wire engine"), and set the pace of a whole
run. A taguru call needs none of it: one ``http://`` origin, a handful of
request headers, a JSON body with its length, a whole response read under the
cap. So a call is written as HTTP/1.1 bytes on a pooled connection and the
response is read by httptools (llhttp, the parser uvicorn uses): the bytes
written are the request aiohttp wrote for the same call, no parsing is done by
hand.

What this engine does not take is handed to :class:`~.aio.AiohttpEngine`,
made (and aiohttp imported) on first need, so the words of every failure stay
its: an ``https://`` URL, a request the environment routes through a proxy, a
URL with a dot segment or a character a request target cannot hold as it is
(the URL standard rewrites those: yarl's rewriting stands), and a connection
that cannot be opened (refused, unresolved: aiohttp words them as taguru
does, :mod:`.failures`). Any other URL's target goes out as ``build_url``
wrote it, which is how taguru's client writes it (``%2F`` stays ``%2F`` in a
query, where yarl would write ``/``).
Once a request is on the wire it is never sent again: a connection lost
before the whole response arrived is :data:`~.failures.PEER_DISCONNECTED`, a
reset its OS error, an unparsable response httptools' own description.
"""

from __future__ import annotations

import asyncio
import re
import zlib
from collections.abc import Mapping
from typing import Final, cast

import httptools
import yarl

from taguru_eval.inputs.proxy import ProxyConfig
from taguru_eval.run.http import bodies
from taguru_eval.run.http.bodies import BodyTooLarge, Ticket
from taguru_eval.run.http.engines import KEEPALIVE_S, URL_CACHE_SIZE, Answer, Engine
from taguru_eval.run.http.failures import PeerDisconnected, ureq_text

_DECODERS: Final = {"gzip": 16 + zlib.MAX_WBITS, "deflate": zlib.MAX_WBITS}
"""``Content-Encoding`` -> the zlib window bits that read it (what the run's
``Accept-Encoding`` offers)."""

_WIRE_TARGET: Final = re.compile(r"/[A-Za-z0-9\-._~!$&'()*+,;=:@/?%]*")
"""A request target the wire writes as it is: RFC 3986's path and query characters."""
_DOT_SEGMENT: Final = re.compile(r"/\.{1,2}(?:[/?]|$)")
"""A ``.`` or ``..`` segment, which the URL standard removes (aiohttp takes it)."""

_READ_UNTIL_CLOSE: Final = -1
"""A response whose body ends when the server closes the connection."""


class _Origin:
    """One ``http://`` origin's idle connections, newest last."""

    __slots__ = ("host", "idle", "port")

    def __init__(self, host: str, port: int) -> None:
        self.host = host
        self.port = port
        self.idle: list[_Connection] = []


class _Target:
    """What a URL's request needs: its origin, and the head after the method."""

    __slots__ = ("head", "origin")

    def __init__(self, origin: _Origin, head: str) -> None:
        self.origin = origin
        self.head = head  # " {target} HTTP/1.1\r\nHost: {host}\r\n"


class _Connection(asyncio.Protocol):
    """One keep-alive connection: at most one response in flight."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.idle_since = 0.0
        self.answer: _WireAnswer | None = None
        self._reading: _WireAnswer | None = None  # the answer the parser's message fills
        self._parser = httptools.HttpResponseParser(self)

    # asyncio.Protocol ------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports implement asyncio.Transport without subclassing it.
        self.transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        if self.answer is None:
            # Bytes no request asked for: the connection cannot carry a next
            # response cleanly.
            self.close()
            return
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            self._fail(httptools.HttpParserError("the server switched protocols"))
        except httptools.HttpParserError as exc:
            self._fail(exc)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        answer = self.answer
        if answer is None or answer.complete:
            return
        if answer.head_done and answer.length == _READ_UNTIL_CLOSE and exc is None:
            answer.finish(keep_alive=False)
        else:
            answer.fail(exc if isinstance(exc, OSError) else PeerDisconnected())

    # httptools callbacks ------------------------------------------------------

    def on_message_begin(self) -> None:
        answer = self.answer
        if answer is None or answer.complete:
            # A response after the one asked for: read into nothing, and the
            # connection is not used again (the answer already read stands).
            self.closed = True
            self._reading = None
        else:
            self._reading = answer

    def on_header(self, name: bytes, value: bytes) -> None:
        if self._reading is not None:
            self._reading.headers.append((name.decode("latin-1").lower(), value.decode("latin-1")))

    def on_headers_complete(self) -> None:
        answer = self._reading
        if answer is None:
            return
        status = self._parser.get_status_code()
        if 100 <= status < 200:
            # An interim response (100 Continue): the final one follows.
            answer.headers.clear()
            return
        answer.status = status
        answer.head(self._framing(answer))

    def on_body(self, body: bytes) -> None:
        if self._reading is not None:
            self._reading.feed(body)

    def on_message_complete(self) -> None:
        answer = self._reading
        if answer is not None and answer.head_done:
            answer.finish(keep_alive=self._parser.should_keep_alive())

    # ------------------------------------------------------------------------

    @staticmethod
    def _framing(answer: _WireAnswer) -> int:
        """The body's declared length, :data:`_READ_UNTIL_CLOSE` when it has
        none, 0 for a chunked one (its end is the last chunk)."""
        if answer.header("transfer-encoding") is not None:
            return 0
        length = answer.header("content-length")
        if length is not None and length.isdigit():
            return int(length)
        return _READ_UNTIL_CLOSE

    def _fail(self, exc: Exception) -> None:
        if self.answer is not None and not self.answer.complete:
            self.answer.fail(exc)
        self.close()

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()


class _WireAnswer:
    """One response on a :class:`_Connection`: its head, then its body as it arrives."""

    __slots__ = (
        "_chunks",
        "_connection",
        "_engine",
        "_error",
        "_keep_alive",
        "_loop",
        "_origin",
        "_settled",
        "_size",
        "_waiter",
        "complete",
        "head_done",
        "headers",
        "length",
        "status",
    )  # fmt: skip

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        connection: _Connection,
        engine: WireEngine,
        origin: _Origin,
    ) -> None:
        self.status = 0
        self.headers: list[tuple[str, str]] = []
        self.length = _READ_UNTIL_CLOSE
        self.head_done = False
        self.complete = False
        self._keep_alive = False
        self._chunks: list[bytes] = []
        self._size = 0
        self._error: BaseException | None = None
        self._waiter: asyncio.Future[None] | None = None
        self._loop = loop
        self._connection = connection
        self._engine = engine
        self._origin = origin
        self._settled = False

    # What the connection reports -------------------------------------------------

    def head(self, length: int) -> None:
        self.length = length
        self.head_done = True
        self._wake()

    def feed(self, chunk: bytes) -> None:
        self._chunks.append(chunk)
        self._size += len(chunk)
        if self._size > bodies.SMALL_BODY_BYTES:
            # Past what is read side by side: hold the socket until the reader
            # has the large-body slot (or refuses the body).
            transport = self._connection.transport
            if transport is not None:
                transport.pause_reading()
            self._wake()

    def finish(self, *, keep_alive: bool) -> None:
        self.complete = True
        self._keep_alive = keep_alive
        self._wake()

    def fail(self, exc: BaseException) -> None:
        self._error = exc
        self._wake()

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def _wait(self) -> None:
        self._waiter = self._loop.create_future()
        try:
            await self._waiter
        finally:
            self._waiter = None

    async def wait_head(self) -> None:
        while not self.head_done and self._error is None:
            await self._wait()
        if self._error is not None and not self.head_done:
            raise self._error

    # Answer ----------------------------------------------------------------------

    def header(self, name: str) -> str | None:
        values = self.header_values(name)
        return ", ".join(values) if values else None

    def header_values(self, name: str) -> list[str]:
        key = name.lower()
        return [value for header, value in self.headers if header == key]

    async def body(self, ticket: Ticket) -> bytes | bytearray:
        try:
            return await self._read(ticket)
        except BaseException:
            self.abandon()  # a deadline, a refused body: the connection is done
            raise

    async def _read(self, ticket: Ticket) -> bytes | bytearray:
        while not self.complete:
            if self._error is not None:
                raise self._error
            if self._size > bodies.SMALL_BODY_BYTES:
                await self._grow(ticket)
                continue
            await self._wait()
        if self._error is not None and not self.complete:
            raise self._error
        data = self._chunks[0] if len(self._chunks) == 1 else b"".join(self._chunks)
        self._chunks = []
        if self._size > bodies.BODY_CAP_BYTES:
            raise BodyTooLarge
        encoding = self.header("content-encoding")
        if encoding is not None and encoding.strip().lower() in _DECODERS:
            return _decoded(data, _DECODERS[encoding.strip().lower()])
        return data

    async def _grow(self, ticket: Ticket) -> None:
        """Let a body grow past :data:`~.bodies.SMALL_BODY_BYTES`: refused when it is
        past the cap or announces more, else read on once the slot is this call's."""
        if self._size > bodies.BODY_CAP_BYTES or self.length > bodies.BODY_CAP_BYTES:
            self._chunks = []
            raise BodyTooLarge
        if not ticket.held:
            await ticket.acquire()
        transport = self._connection.transport
        if transport is not None and not self._connection.closed:
            transport.resume_reading()
        if not self.complete and self._error is None:
            await self._wait()

    async def release(self) -> None:
        if self._settled:
            return
        self._settled = True
        self._chunks = []
        connection = self._connection
        connection.answer = None
        if self.complete and self._keep_alive and not connection.closed:
            connection.idle_since = self._loop.time()
            self._origin.idle.append(connection)
        else:
            connection.close()
        self._engine.free()

    def abandon(self) -> None:
        """The call ended before its response did (a deadline, a failure): the
        connection cannot carry another request."""
        if not self._settled:
            self._settled = True
            self._connection.answer = None
            self._connection.close()
            self._engine.free()


def _decoded(data: bytes, wbits: int) -> bytes:
    """A compressed body, inflated under the cap."""
    inflater = zlib.decompressobj(wbits)
    plain = inflater.decompress(data, bodies.BODY_CAP_BYTES + 1)
    if len(plain) > bodies.BODY_CAP_BYTES:
        raise BodyTooLarge
    return plain + inflater.flush()


class WireEngine:
    """Plain ``http://`` calls on pooled connections of the run's loop; the rest
    through :class:`~.engines.AiohttpEngine`."""

    def __init__(self, max_connections: int, proxies: ProxyConfig | None = None) -> None:
        self._max_connections = max(1, max_connections)
        self._proxies = proxies if proxies is not None and proxies.active else None
        self._origins: dict[tuple[str, int], _Origin] = {}
        self._targets: dict[str, _Target | None] = {}
        self._open = 0
        self._waiting: list[asyncio.Future[None]] = []
        self._fallback: Engine | None = None

    def _other(self) -> Engine:
        if self._fallback is None:
            from taguru_eval.run.http.aio import AiohttpEngine

            self._fallback = AiohttpEngine(self._max_connections, self._proxies)
        return self._fallback

    def _target(self, url: str) -> _Target | None:
        """The wire target of ``url``, or None when aiohttp takes it."""
        if url in self._targets:
            return self._targets[url]
        target = self._parse(url)
        if len(self._targets) < URL_CACHE_SIZE:
            self._targets[url] = target
        return target

    def _parse(self, url: str) -> _Target | None:
        if not url.isascii() or url[:7].lower() != "http://":
            return None
        try:
            parsed = yarl.URL(url)
            host, port = parsed.host, parsed.port
        except ValueError:
            return None
        if not host or port is None or parsed.raw_user or parsed.raw_password:
            return None
        # The request target is the URL's own text (build_url wrote it as taguru's
        # url crate does): yarl would requote it (%2F in a query, %41) and remove
        # dot segments, which the wire leaves to aiohttp.
        before_fragment = url.partition("#")[0]
        path_at = len(before_fragment)
        for mark in "/?":
            found = before_fragment.find(mark, 7)
            if found != -1:
                path_at = min(path_at, found)
        written = before_fragment[path_at:]
        written = written if written.startswith("/") else "/" + written
        if not _WIRE_TARGET.fullmatch(written) or _DOT_SEGMENT.search(written):
            return None
        if self._proxies is not None:
            routed = f"[{host}]" if ":" in host else host
            if self._proxies.proxy_for("http", routed) is not None:
                return None
        origin = self._origins.setdefault((host, port), _Origin(host, port))
        head = f" {written} HTTP/1.1\r\nHost: {parsed.host_port_subcomponent}\r\n"
        return _Target(origin, head)

    async def send(
        self, method: str, url: str, headers: Mapping[str, str], content: bytes | None
    ) -> Answer:
        target = self._target(url)
        if target is None:
            return await self._other().send(method, url, headers, content)
        await self._slot()
        try:
            connection = await self._connection(target.origin)
        except BaseException:
            self.free()
            raise
        if connection is None:  # could not connect: aiohttp tries, and words it
            self.free()
            return await self._other().send(method, url, headers, content)
        loop = asyncio.get_running_loop()
        answer = _WireAnswer(loop, connection, self, target.origin)
        connection.answer = answer
        head = method + target.head
        head += "".join(f"{name}: {value}\r\n" for name, value in headers.items())
        if content is not None:
            head += f"Content-Length: {len(content)}\r\n"
        request = (head + "\r\n").encode("latin-1")
        try:
            assert connection.transport is not None
            connection.transport.write(request if content is None else request + content)
            await answer.wait_head()
        except BaseException:
            answer.abandon()
            raise
        return answer

    async def _slot(self) -> None:
        """One of ``max_connections`` connections for this call."""
        while self._open >= self._max_connections:
            waiter = asyncio.get_running_loop().create_future()
            self._waiting.append(waiter)
            try:
                await waiter
            finally:
                if waiter in self._waiting:
                    self._waiting.remove(waiter)
        self._open += 1

    def free(self) -> None:
        self._open -= 1
        while self._waiting:
            waiter = self._waiting.pop(0)
            if not waiter.done():
                waiter.set_result(None)
                break

    async def _connection(self, origin: _Origin) -> _Connection | None:
        """An idle connection to ``origin`` still fresh, or a new one (None: none opens)."""
        loop = asyncio.get_running_loop()
        now = loop.time()
        while origin.idle:
            connection = origin.idle.pop()
            if not connection.closed and now - connection.idle_since < KEEPALIVE_S:
                return connection
            connection.close()
        try:
            _transport, connection = await loop.create_connection(
                _Connection, origin.host, origin.port
            )
        except OSError:
            return None
        return connection

    def reason(self, exc: BaseException, url: str = "") -> str:
        known = ureq_text(exc)
        if known is not None:
            return known
        if self._fallback is not None and not isinstance(exc, httptools.HttpParserError):
            return self._fallback.reason(exc, url)
        text = " ".join(str(exc).split())
        return text or type(exc).__name__

    async def aclose(self) -> None:
        for origin in self._origins.values():
            while origin.idle:
                origin.idle.pop().close()
        if self._fallback is not None:
            await self._fallback.aclose()

"""Plain-HTTP exchanges spoken straight over asyncio: run mode's common path.

Why it exists: against a server answering after 50 ms at ``--concurrency 64``
on the 2-core machine, aiohttp's own per-call machinery (the request and
response objects, the body writer as a task of its own, the stream reader)
holds each answer in the event loop's queue long enough that bare aiohttp
reaches 87–93 % of the ideal call rate, while 64 keep-alive connections
spoken to by an ``asyncio.Protocol`` reach 94–96 % on the same stub in the
same minutes (``benchmarks/README.md``).

What it serves (:meth:`PlainRoute.of`): a request to an ``http://`` URL
without userinfo, sent exactly as aiohttp sends it (the same request line,
headers in the same order, body; ``tests/run/test_plain_path.py`` compares
the bytes). Whatever aiohttp would refuse to send, and every connection this
path cannot open, is left to aiohttp before a byte is sent, so its own words
describe that failure. Responses are HTTP/1.x framed by ``Content-Length``,
chunked coding or the connection's end, with the client's body cap and its
one large-body slot; a response the parser cannot read fails the call with a
:class:`PlainHttpError` whose words are this module's (HTTP.md §11 item 2:
transport error texts are the library's own), except the disconnections and
short bodies of a well-formed response, worded as aiohttp words them.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Final

_MAX_HEAD_BYTES: Final = 64 * 1024
_STATUS_LINE: Final = re.compile(rb"HTTP/1\.([01]) ([0-9]{3})(?: [^\r\n]*)?")
_TOKEN: Final = re.compile(rb"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_CHUNK_SIZE: Final = re.compile(rb"([0-9A-Fa-f]{1,15})[ \t]*(?:;[^\r\n]*)?")
# What aiohttp refuses in a header line before sending (its header-injection check).
_FORBIDDEN_IN_HEADERS: Final = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")
_NO_BODY_STATUSES: Final = frozenset({204, 304})
_POST_METHODS: Final = frozenset({"PATCH", "POST", "PUT"})
MAX_IDLE_S = 2.0
"""A connection idle for longer is not reused: a server may be closing it just as a
request goes out (uvicorn closes after 5 s, aiohttp's pool keeps them for 15 s),
which would fail that call; loopback or not, a fresh connection costs one round trip."""

Origin = tuple[str, int]
RawHeaders = tuple[tuple[bytes, bytes], ...]


class PlainHttpError(Exception):
    """A response this path could not read; ``answered``: its head had arrived."""

    def __init__(self, text: str, *, answered: bool) -> None:
        super().__init__(text)
        self.text = text
        self.answered = answered


@dataclass(frozen=True, slots=True)
class PlainResponse:
    """A whole response: status, header lines as sent, body."""

    status: int
    raw_headers: RawHeaders
    body: bytearray

    def header(self, name: bytes) -> bytes | None:
        """The last value of header ``name`` (lower-case), if any."""
        found = None
        for key, value in self.raw_headers:
            if key.lower() == name:
                found = value
        return found


@dataclass(frozen=True, slots=True)
class PlainRoute:
    """Where and what to send for one (method, URL, headers) shape.

    ``before_length``/``after_length`` surround the ``content-length`` value
    (a request without a body has all its bytes in ``before_length``).
    """

    origin: Origin
    before_length: bytes
    after_length: bytes

    @classmethod
    def of(
        cls,
        method: str,
        scheme: str,
        host: str | None,
        port: int | None,
        has_userinfo: bool,
        target: str,
        headers: Mapping[str, str],
    ) -> PlainRoute | None:
        """The route for a request aiohttp would send to ``target`` with ``headers``
        (``content-length`` among them when the request has a body, any value), or
        ``None`` when this path leaves it to aiohttp."""
        if scheme != "http" or host is None or port is None or has_userinfo:
            return None
        names = {name.lower() for name in headers}
        ordered = dict(headers)
        if method in _POST_METHODS and "content-type" not in names:
            ordered["Content-Type"] = "application/octet-stream"
        lines = [f"{method} {target} HTTP/1.1"]
        lines.extend(f"{name}: {value}" for name, value in ordered.items())
        if any(_FORBIDDEN_IN_HEADERS.search(line) for line in lines):
            return None
        length_at = next(
            (index for index, name in enumerate(ordered) if name.lower() == "content-length"),
            None,
        )
        if length_at is None:
            return cls((host, port), ("\r\n".join(lines) + "\r\n\r\n").encode("utf-8"), b"")
        # The head split where the content-length value goes (line 0 is the request line).
        name = list(ordered)[length_at]
        before = "\r\n".join(lines[: length_at + 1]) + f"\r\n{name}: "
        after = "".join(f"\r\n{line}" for line in lines[length_at + 2 :]) + "\r\n\r\n"
        return cls((host, port), before.encode("utf-8"), after.encode("utf-8"))

    def request(self, content: bytes | None) -> bytes:
        """The request's bytes, ``content`` included."""
        if content is None:
            return self.before_length
        return b"".join(
            (self.before_length, str(len(content)).encode(), self.after_length, content)
        )


_DONE: Final = "done"
_GREW: Final = "grew"


class PlainConnection(asyncio.Protocol):
    """One keep-alive connection reading one response at a time (``status`` and
    ``answered`` are the current response's once its head is in)."""

    def __init__(self, small_body: int, body_cap: int, too_large: Callable[[], str]) -> None:
        self._small_body = small_body
        self._body_cap = body_cap
        self._too_large = too_large
        self._transport: asyncio.Transport | None = None
        self._buffer = bytearray()
        self._waiter: asyncio.Future[str] | None = None
        self._event: str | BaseException | None = None
        self._busy = False
        self.reusable = True
        self.idle_since = 0.0
        self._reset()

    def _reset(self) -> None:
        self.answered = False
        self.status = 0
        self._headers: RawHeaders = ()
        self._framing = ""
        self._remaining = 0
        self._body = bytearray()
        self._declared = 0
        self._slot_held = False
        self.needs_slot = False
        self._paused = False

    # -- asyncio.Protocol --------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport

    def data_received(self, data: bytes) -> None:
        if not self._busy or self._framing == "done":
            # Nothing asked for it: the connection cannot be trusted again.
            self.reusable = False
            return
        self._buffer += data
        try:
            self._advance()
        except PlainHttpError as error:
            self.reusable = False
            self._signal(error)

    def eof_received(self) -> bool:
        return False  # close the transport; connection_lost says what it meant

    def connection_lost(self, exc: Exception | None) -> None:
        self.reusable = False
        self._transport = None
        if not self._busy or self._event == _DONE or isinstance(self._event, BaseException):
            return
        if self._framing == "close":
            if len(self._body) + len(self._buffer) > self._body_cap:  # read while paused
                self._signal(PlainHttpError(self._too_large(), answered=True))
                return
            self._body += self._buffer
            self._buffer.clear()
            self._finish()
        elif self._framing == "length":
            received = len(self._body) + len(self._buffer)
            self._signal(
                PlainHttpError(
                    "Response payload is not completed: <ContentLengthError: 400, message="
                    "'Not enough data to satisfy content length header "
                    f"(received {received} of {self._declared} bytes).'>",
                    answered=True,
                )
            )
        elif self._framing == "chunked":
            self._signal(
                PlainHttpError(
                    "Response payload is not completed: <TransferEncodingError: 400, "
                    "message='Not enough data to satisfy transfer length header.'>",
                    answered=True,
                )
            )
        else:
            self._signal(PlainHttpError("Server disconnected", answered=False))

    # -- what the client calls ----------------------------------------------------

    def is_open(self) -> bool:
        return self._transport is not None and not self._transport.is_closing()

    def send(self, request: bytes) -> None:
        assert self._transport is not None
        self._reset()
        self._buffer.clear()
        self._busy = True
        self._event = None
        self._transport.write(request)

    async def next_event(self) -> str:
        """``_DONE`` once the whole response is in, ``_GREW`` when the body has
        passed the small-body size (see :attr:`needs_slot`); raises
        :class:`PlainHttpError`."""
        if self._event is None:
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
        event, self._event = self._event, None
        if isinstance(event, BaseException):
            raise event
        assert event is not None
        return event

    def slot_taken(self) -> None:
        """The large-body slot is this call's: the body may grow on."""
        self._slot_held = True
        self.needs_slot = False
        self._resume()

    def response(self) -> PlainResponse:
        body, self._body = self._body, bytearray()
        self._busy = False
        return PlainResponse(self.status, self._headers, body)

    def close(self) -> None:
        self.reusable = False
        self._busy = False
        if self._transport is not None:
            self._transport.abort()
            self._transport = None

    # -- parsing ------------------------------------------------------------------

    def _signal(self, event: str | BaseException) -> None:
        self._event = event
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result("")

    def _finish(self) -> None:
        self._framing = "done"
        if self._buffer:  # bytes past the response: nothing may follow on this connection
            self.reusable = False
            self._buffer.clear()
        self._signal(_DONE)

    def _advance(self) -> None:
        if self._paused or self._framing == "done":
            return
        if not self._framing and not self._read_head():
            return
        if self._framing == "length":
            taken = min(self._remaining, len(self._buffer))
            if taken:
                self._grow(self._buffer[:taken])
                del self._buffer[:taken]
                self._remaining -= taken
            if self._remaining == 0:
                self._finish()
        elif self._framing == "chunked":
            self._read_chunks()
        elif self._framing == "close" and self._buffer:
            self._grow(self._buffer)
            self._buffer = bytearray()

    def _read_head(self) -> bool:
        """Parses the head once it is whole; skips interim 1xx answers."""
        while True:
            end = self._buffer.find(b"\r\n\r\n")
            if end < 0:
                if len(self._buffer) > _MAX_HEAD_BYTES:
                    raise PlainHttpError("malformed response: head too long", answered=False)
                return False
            lines = bytes(self._buffer[:end]).split(b"\r\n")
            del self._buffer[: end + 4]
            matched = _STATUS_LINE.fullmatch(lines[0])
            if matched is None:
                raise PlainHttpError("malformed response: bad status line", answered=False)
            status = int(matched.group(2))
            headers = tuple(_header(line) for line in lines[1:])
            if 100 <= status < 200 and status != 101:
                continue
            break
        self.status = status
        self._headers = headers
        self.answered = True
        self._choose_framing(matched.group(1) == b"1", headers)
        return True

    def _choose_framing(self, http11: bool, headers: RawHeaders) -> None:
        lengths = {value for name, value in headers if name.lower() == b"content-length"}
        codings = [value for name, value in headers if name.lower() == b"transfer-encoding"]
        connection = b",".join(value for name, value in headers if name.lower() == b"connection")
        tokens = {token.strip().lower() for token in connection.split(b",")}
        if not http11 or b"close" in tokens:
            self.reusable = False
        if self.status in _NO_BODY_STATUSES or self.status == 101:
            self._framing = "length"
            self._remaining = 0
        elif codings:
            last = b",".join(codings).split(b",")[-1].strip().lower()
            self._framing = "chunked" if last == b"chunked" else "close"
            self._remaining = -1
        elif lengths:
            if len(lengths) != 1 or not next(iter(lengths)).isdigit():
                raise PlainHttpError("malformed response: bad Content-Length", answered=True)
            self._remaining = self._declared = int(next(iter(lengths)))
            if self._remaining > self._body_cap:
                raise PlainHttpError(self._too_large(), answered=True)
            self._framing = "length"
        else:
            self._framing = "close"
        if self._framing == "close":
            self.reusable = False

    def _read_chunks(self) -> None:
        while not self._paused:
            if self._remaining == -1:  # at a size line
                end = self._buffer.find(b"\r\n")
                if end < 0:
                    if len(self._buffer) > _MAX_HEAD_BYTES:
                        raise PlainHttpError("malformed response: bad chunk size", answered=True)
                    return
                matched = _CHUNK_SIZE.fullmatch(bytes(self._buffer[:end]))
                if matched is None:
                    raise PlainHttpError("malformed response: bad chunk size", answered=True)
                del self._buffer[: end + 2]
                self._remaining = int(matched.group(1), 16)
                if self._remaining == 0:
                    self._remaining = -2
                elif len(self._body) + self._remaining > self._body_cap:
                    raise PlainHttpError(self._too_large(), answered=True)
            elif self._remaining == -2:  # trailers, up to an empty line
                end = self._buffer.find(b"\r\n")
                if end < 0:
                    if len(self._buffer) > _MAX_HEAD_BYTES:
                        raise PlainHttpError("malformed response: trailer too long", answered=True)
                    return
                del self._buffer[: end + 2]
                if end == 0:
                    self._finish()
                    return
            else:
                if len(self._buffer) < self._remaining + 2:
                    return
                if self._buffer[self._remaining : self._remaining + 2] != b"\r\n":
                    raise PlainHttpError("malformed response: bad chunk end", answered=True)
                self._grow(self._buffer[: self._remaining])
                del self._buffer[: self._remaining + 2]
                self._remaining = -1

    def _grow(self, data: bytes | bytearray) -> None:
        """Adds body bytes within the cap; past the small-body size without the
        slot, reading pauses until the caller holds it."""
        size = len(self._body) + len(data)
        if size > self._body_cap:
            raise PlainHttpError(self._too_large(), answered=True)
        self._body += data
        if size > self._small_body and not self._slot_held and not self.needs_slot:
            self.needs_slot = True
            self._paused = True
            if self._transport is not None:
                self._transport.pause_reading()
            self._signal(_GREW)

    def _resume(self) -> None:
        if self._paused:
            self._paused = False
            if self._transport is not None:
                self._transport.resume_reading()
            try:
                self._advance()
            except PlainHttpError as error:
                self.reusable = False
                self._signal(error)


def _header(line: bytes) -> tuple[bytes, bytes]:
    name, colon, value = line.partition(b":")
    if not colon or _TOKEN.fullmatch(name) is None:
        raise PlainHttpError("malformed response: bad header line", answered=False)
    return name, value.strip(b" \t")


class PlainPool:
    """Keep-alive connections per origin, at most ``max_idle`` kept idle."""

    def __init__(
        self, max_idle: int, small_body: int, body_cap: int, too_large: Callable[[], str]
    ) -> None:
        self._max_idle = max_idle
        self._idle: dict[Origin, list[PlainConnection]] = {}
        self._factory = lambda: PlainConnection(small_body, body_cap, too_large)
        self._closed = False

    async def connection(self, origin: Origin) -> PlainConnection | None:
        """An open connection to ``origin``, or ``None`` when none can be opened."""
        idle = self._idle.get(origin)
        now = time.monotonic()
        while idle:
            connection = idle.pop()
            fresh = now - connection.idle_since <= MAX_IDLE_S
            if fresh and connection.is_open() and connection.reusable:
                return connection
            connection.close()
        try:
            _transport, connection = await asyncio.get_running_loop().create_connection(
                self._factory, origin[0], origin[1]
            )
        except (OSError, ValueError):  # refused, unreachable, unresolvable: aiohttp's to word
            return None
        return connection

    def release(self, origin: Origin, connection: PlainConnection) -> None:
        """Back to the pool if it can carry another request, closed otherwise."""
        idle = self._idle.setdefault(origin, [])
        if self._closed or not connection.reusable or len(idle) >= self._max_idle:
            connection.close()
        else:
            connection.idle_since = time.monotonic()
            idle.append(connection)

    @staticmethod
    async def exchange(
        connection: PlainConnection, request: bytes, take_slot: Callable[[], Awaitable[None]]
    ) -> PlainResponse:
        """Sends ``request`` and reads the whole response, taking the large-body slot
        (``take_slot``) for a body past the small-body size; the caller releases or
        closes ``connection``."""
        connection.send(request)
        while True:
            event = await connection.next_event()
            if connection.needs_slot:
                await take_slot()
                connection.slot_taken()
            if event == _DONE:
                return connection.response()

    def close(self) -> None:
        self._closed = True
        for idle in self._idle.values():
            for connection in idle:
                connection.close()
        self._idle.clear()

"""One run's HTTP client: one engine, and everything taguru's client does around a call.

Everything taguru's own client does to a request and to a failure is pinned
here once (EVALUATE.md §0.4, HTTP.md §2, ERRATA (13b)): per-segment
percent-encoding (:mod:`.urls`), the bearer header, one deadline per call, the
256 MiB body cap (:mod:`.bodies`), no retries, proxies from the environment,
up to 10 redirects with the ``Authorization`` header dropped on every one,
envelope unwrapping and the exact failure-message shapes that end up in the
artifact. The bytes travel through an engine (:mod:`.engines`): aiohttp's
client for a run, or an httpx transport a caller hands in. The client knows
nothing about cases or metrics.

A lane that names the type it reads (``post(…, into=Kind)``) gets the
payload decoded by msgspec straight from the body's bytes into that type
(no intermediate dicts), whenever the body is one the generic path would
read to the same value: valid UTF-8, holding no configured token, a 200
envelope whose ``result`` fits the type. Any other body takes the generic
path (parse, redact, unwrap) and the lane converts the payload itself, with
the same outcome as before (``tests/run/test_typed_replies.py`` holds the two
paths equal).

Server text enters the program here and nowhere else, so this is where it is
made safe: every body has the configured tokens replaced before it is
decoded and, when its text could spell one with JSON escapes, in every decoded
string and key once more, and every failure message (a payload that does not
parse included, :meth:`TaguruClient.payload_as`) and every server prose a lane
keeps (:class:`~taguru_eval._base.wire.Prose`) additionally has ``Bearer``/``Basic``
credentials and URL userinfo replaced (:meth:`TaguruClient.redact`), before
any artifact, table, report or stderr line can see it: no lane redacts.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING, Any, Final, Generic, NamedTuple, TypeVar, cast

import msgspec

from taguru_eval._base.jsonstrict import JsonShapeError
from taguru_eval._base.redact import Redactor
from taguru_eval._base.text import encodable, trim
from taguru_eval._base.wire import Prose, convert
from taguru_eval.contract import VERSION
from taguru_eval.inputs.proxy import ProxyConfig
from taguru_eval.run.http.bodies import LargeBodySlot, Ticket, compact_json, parse_json
from taguru_eval.run.http.engines import URL_CACHE_SIZE, Answer, Engine
from taguru_eval.run.http.urls import build_url
from taguru_eval.run.http.wire import WireEngine

if TYPE_CHECKING:
    import httpx

T = TypeVar("T")

REQUEST_TIMEOUT_S: Final = 35.0
# ureq's defaults: follow up to 10 redirects, the 11th is an error.
MAX_REDIRECTS: Final = 10
# Methods ureq will not resend on a 307/308 (it never replays a request body).
_BODY_METHODS: Final = frozenset({"POST", "PUT", "PATCH", "DELETE"})
# Request headers that never follow a redirect (ureq-proto's list, plus the ones
# recomputed for the new target).
_DROPPED_ON_REDIRECT: Final = frozenset(
    {"authorization", "proxy-authorization", "cookie", "content-length", "host"}
)
REQUEST_HEADERS: Final = {
    "Accept": "*/*",
    "Accept-Encoding": "gzip, deflate",
    "User-Agent": f"taguru_eval/{VERSION}",
}
"""What every request says besides its credentials and its body's type, whichever
engine sends it (the transport adds ``Host`` and ``Content-Length``)."""


class CallFailure(Exception):
    """One failed HTTP call, with the message taguru would record for it.

    ``status`` is the HTTP status when a response arrived, ``code`` the error
    body's ``code`` string on a 404 (the citation lane needs ``no_source`` vs
    ``no_paragraph``), ``latency_ms`` the exchange time up to the failure.
    """

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        code: str | None = None,
        latency_ms: int = 0,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.code = code
        self.latency_ms = latency_ms

    def __str__(self) -> str:
        return self.message


class Reply(msgspec.Struct, frozen=True):
    """A successful call: the unwrapped payload and how long the exchange took.

    ``typed``: the payload is already the type the caller named (``into=``),
    decoded straight from the body; otherwise it is the parsed JSON value.
    (A msgspec Struct: one is made per call, at a fraction of a frozen dataclass.)
    """

    payload: object
    status: int
    latency_ms: int
    url: str
    typed: bool = False


@dataclass(frozen=True, slots=True)
class RawReply:
    """A response read without envelope handling (``GET /health``)."""

    status: int
    text: str
    latency_ms: int
    url: str


class _Envelope(msgspec.Struct, Generic[T], frozen=True, gc=False):
    """taguru's success envelope, of which a typed reply reads ``result`` alone."""

    result: T


def bearer_headers(token: str | None) -> dict[str, str]:
    """``Authorization: Bearer …`` when a token is configured, else nothing."""
    return {"Authorization": f"Bearer {token}"} if token else {}


def _elapsed_ms(started_ns: int) -> int:
    return max(0, (time.monotonic_ns() - started_ns) // 1_000_000)


def _is_redirect(status: int) -> bool:
    """A status ureq follows: any 3xx except 304 (which has no Location)."""
    return 300 <= status < 400 and status != 304


class _Hop(NamedTuple):
    """One request of a call: the caller's, or the one a redirect asked for."""

    method: str
    url: str
    headers: Mapping[str, str]
    content: bytes | None


class TaguruClient:
    """One run's HTTP client. Use as ``async with TaguruClient(...) as client``.

    No call is ever retried; a ``Retry-After`` header only lands in the message.
    ``secrets`` are the tokens to redact from server text (the sent ``token`` is
    always among them); ``proxies`` route requests as taguru's client would
    (ignored when a ``transport`` is injected: the calls then go through an
    ``httpx.AsyncClient`` over it, :class:`~.engines.HttpxEngine`).
    """

    def __init__(
        self,
        base_url: str,
        token: str | None = None,
        *,
        transport: httpx.AsyncBaseTransport | None = None,
        max_connections: int = 8,
        timeout_s: float = REQUEST_TIMEOUT_S,
        secrets: Iterable[str] = (),
        proxies: ProxyConfig | None = None,
    ) -> None:
        self.base_url = base_url
        self._timeout_s = timeout_s
        self._redactor = Redactor((token, *secrets))
        self._large_bodies = LargeBodySlot()
        self._built: dict[tuple[tuple[str, ...], tuple[tuple[str, str], ...]], str] = {}
        self._engine: Engine
        if transport is None:
            self._engine = WireEngine(max_connections, proxies)
        else:
            from taguru_eval.run.http.engines import HttpxEngine

            self._engine = HttpxEngine(transport)
        self._headers = {**REQUEST_HEADERS, **bearer_headers(token)}
        self._json_headers = {**self._headers, "Content-Type": "application/json"}
        self._decoders: dict[Any, msgspec.json.Decoder[Any]] = {}

    async def __aenter__(self) -> TaguruClient:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the pool (idempotent)."""
        await self._engine.aclose()

    def redact(self, text: str) -> str:
        """Server text made safe to store and show: tokens, ``Bearer``/``Basic``
        credentials and URL userinfo replaced, lone surrogates spelled out."""
        return encodable(self._redactor.message(text))

    def _prose(self, kind: type, value: object) -> Prose:
        """The decoders' ``dec_hook``: a :class:`Prose` string comes out redacted."""
        if kind is Prose and isinstance(value, str):
            return Prose(self.redact(value))
        raise TypeError(f"Expected `str`, got `{type(value).__name__}`")

    def payload_as(self, reply: Reply, kind: type[T], what: str) -> T:
        """``reply``'s payload as ``kind``: as decoded, or converted from the parsed
        value; one that does not fit is the :class:`CallFailure`
        ``{what} response did not parse: {field}: {reason}``, redacted."""
        if reply.typed:
            return cast(T, reply.payload)
        try:
            return convert(reply.payload, kind, self._prose)
        except JsonShapeError as exc:
            raise self._failure(
                f"{what} response did not parse: {exc.detail}",
                status=reply.status,
                latency_ms=reply.latency_ms,
            ) from None

    def _failure(
        self,
        message: str,
        *,
        status: int | None = None,
        code: str | None = None,
        latency_ms: int = 0,
    ) -> CallFailure:
        """A :class:`CallFailure` whose message has been through :meth:`redact`."""
        return CallFailure(self.redact(message), status=status, code=code, latency_ms=latency_ms)

    def url(self, segments: Sequence[str], query: Sequence[tuple[str, str]] = ()) -> str:
        """The request URL for ``segments`` under this client's base URL (memoised)."""
        key = (tuple(segments), tuple(query))
        url = self._built.get(key)
        if url is None:
            url = build_url(self.base_url, segments, query)
            if len(self._built) < URL_CACHE_SIZE:
                self._built[key] = url
        return url

    async def get(self, segments: Sequence[str], query: Sequence[tuple[str, str]] = ()) -> Reply:
        """``GET`` an enveloped route; raises :class:`CallFailure`."""
        return await self._enveloped("GET", self.url(segments, query), None, None)

    async def post(
        self, segments: Sequence[str], body: Mapping[str, object], into: Any = None
    ) -> Reply:
        """``POST`` compact JSON to an enveloped route; raises :class:`CallFailure`.

        ``into`` (a msgspec type): the payload is decoded straight into it when
        the body allows (``Reply.typed``), else it is the parsed JSON value.
        """
        return await self._enveloped("POST", self.url(segments), body, into)

    async def get_bare(
        self, segments: Sequence[str], *, timeout_s: float | None = None
    ) -> RawReply:
        """``GET`` an un-enveloped route (``/health``); the body comes back as text.

        Only HTTP 200 is success: any other status raises :class:`CallFailure`
        with the usual ``{url} answered {status}: …`` message.
        """
        url = self.url(segments)
        started = time.monotonic_ns()
        ticket = self._large_bodies.ticket()
        try:
            status, data, retry_after = await self._exchange(
                "GET", url, None, timeout_s, started, ticket
            )
            text = self._decode(url, data, started)
            del data  # a failure raised below keeps this frame, never the body
            if isinstance(text, CallFailure):
                raise text
            if status != 200:
                raise self._status_failure(url, status, text, retry_after, _elapsed_ms(started))
        finally:
            ticket.release()
        return RawReply(status=status, text=text, latency_ms=_elapsed_ms(started), url=url)

    async def _enveloped(
        self, method: str, url: str, body: Mapping[str, object] | None, into: Any
    ) -> Reply:
        started = time.monotonic_ns()
        ticket = self._large_bodies.ticket()
        try:
            status, data, retry_after = await self._exchange(
                method, url, body, None, started, ticket
            )
            if into is not None and status == 200:
                decoded = self._typed(data, into)
                if decoded is not _UNFIT:
                    return Reply(
                        payload=decoded,
                        status=status,
                        latency_ms=_elapsed_ms(started),
                        url=url,
                        typed=True,
                    )
            text = self._decode(url, data, started)
            del data  # a failure raised below keeps this frame, never the body
            if isinstance(text, CallFailure):
                raise text
            if status != 200:
                raise self._status_failure(url, status, text, retry_after, _elapsed_ms(started))
            try:
                document = parse_json(text)
            except ValueError:
                document = None
            if self._redactor.may_hide_escaped(text):
                document = self._redactor.payload(document)
        finally:
            ticket.release()
        if not isinstance(document, dict) or "result" not in document:
            raise self._failure(
                f"{url}: not a taguru response: {trim(text)}",
                status=status,
                latency_ms=_elapsed_ms(started),
            )
        payload: object = document["result"]
        return Reply(payload=payload, status=status, latency_ms=_elapsed_ms(started), url=url)

    def _typed(self, data: bytes | bytearray, into: Any) -> object:
        """``result`` of a 200 body decoded straight into ``into``, or :data:`_UNFIT`
        when the generic path could read the body differently: not UTF-8 (msgspec
        does not check a member it skips), a configured token in any spelling
        (it must be replaced before anything reads the text), or anything msgspec
        refuses (not an envelope, a shape the lane words itself, a lone surrogate,
        a NaN literal, a BOM)."""
        if not data.isascii():
            try:
                data.decode("utf-8")
            except UnicodeDecodeError:
                return _UNFIT
        if not self._redactor.absent_from(data):
            return _UNFIT
        decoder = self._decoders.get(into)
        if decoder is None:
            decoder = self._decoders[into] = msgspec.json.Decoder(
                _Envelope[into], dec_hook=self._prose
            )
        try:
            return decoder.decode(data).result
        except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
            return _UNFIT

    def _decode(self, url: str, data: bytes | bytearray, started: int) -> str | CallFailure:
        """The body as text, with every configured token already replaced, or the
        failure to raise once the caller has let go of the body.

        The failure is made outside the handler (the decode error holds a copy of
        the body, and would be its __context__) and returned, not raised: its
        traceback would keep this frame, and the body with it.
        """
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            reason = " ".join(str(exc).split())
        else:
            return self._redactor.body(text)
        return self._failure(
            f"{url}: unreadable response: {reason}", latency_ms=_elapsed_ms(started)
        )

    async def _exchange(
        self,
        method: str,
        url: str,
        body: Mapping[str, object] | None,
        timeout_s: float | None,
        started: int,
        ticket: Ticket,
    ) -> tuple[int, bytes | bytearray, str | None]:
        """Send one request (following redirects) and read its whole body, within
        one overall deadline: the status, the body and the ``Retry-After`` header."""
        limit = self._timeout_s if timeout_s is None else timeout_s
        try:
            content = None if body is None else compact_json(body)
        except (TypeError, ValueError) as exc:
            raise self._failure(f"{url}: {' '.join(str(exc).split())}") from None
        headers = self._headers if content is None else self._json_headers
        answer: Answer | None = None
        data: bytes | bytearray | None = None
        # Failures are raised after their handlers, never inside one: an exception
        # raised while another is handled keeps it as __context__, and with it the
        # traceback's frames and whatever they held (a body read up to the cap).
        failure: CallFailure | None = None
        try:
            async with asyncio.timeout(limit):
                answer = await self._send_following(_Hop(method, url, headers, content), started)
                try:
                    data = await answer.body(ticket)
                except Exception as exc:
                    failure = self._failure(
                        f"{url}: unreadable response: {self._engine.reason(exc)}",
                        status=answer.status,
                        latency_ms=_elapsed_ms(started),
                    )
                finally:
                    await answer.release()
        except TimeoutError:
            # Past the deadline while reading the body once the answer had begun.
            what = "unreadable response: " if answer is not None else ""
            failure = self._failure(
                f"{url}: {what}timed out after {limit:g} s", latency_ms=_elapsed_ms(started)
            )
        if failure is not None:
            raise failure
        assert answer is not None and data is not None  # read, or failed above
        status = answer.status
        return status, data, None if status == 200 else answer.header("retry-after")

    async def _send_following(self, hop: _Hop, started: int) -> Answer:
        """Send ``hop``, following up to :data:`MAX_REDIRECTS` redirects as ureq does.

        Any 3xx but 304 is a redirect. Failures name the URL the caller asked
        for, whichever hop failed.
        """
        url = hop.url
        for hops in range(MAX_REDIRECTS + 1):
            # The engine is the boundary: whatever its library raises (a refused
            # connection, a malformed response) is this call's failure, never a crash.
            try:
                answer = await self._engine.send(hop.method, hop.url, hop.headers, hop.content)
            except Exception as exc:
                raise self._failure(
                    f"{url}: {self._engine.reason(exc, url)}", latency_ms=_elapsed_ms(started)
                ) from None
            if not _is_redirect(answer.status):
                return answer
            await answer.release()
            if hops == MAX_REDIRECTS:
                break
            hop = self._redirected(hop, answer, url, started)
        raise self._failure(f"{url}: too many redirects", latency_ms=_elapsed_ms(started))

    def _redirected(self, hop: _Hop, answer: Answer, url: str, started: int) -> _Hop:
        """The request a redirect calls for: ureq's method rules, no credentials.

        The target is resolved by httpx's URL parser (RFC 3986), imported only
        here: a run meets no redirect.
        """
        import httpx

        locations = answer.header_values("location")
        if not locations:
            raise self._failure(
                f"{url}: protocol: missing a location header", latency_ms=_elapsed_ms(started)
            )
        location = locations[-1]
        try:
            target = str(httpx.URL(hop.url).join(location))
        except (httpx.InvalidURL, ValueError):
            raise self._failure(
                f"{url}: protocol: location header is malformed: {location}",
                latency_ms=_elapsed_ms(started),
            ) from None
        method = hop.method
        if answer.status in (307, 308):
            if method in _BODY_METHODS:  # ureq never resends a body
                raise self._failure(f"{url}: redirect failed", latency_ms=_elapsed_ms(started))
        elif method not in ("GET", "HEAD"):
            method = "GET"
        headers = {
            name: value
            for name, value in hop.headers.items()
            if name.lower() not in _DROPPED_ON_REDIRECT
        }
        content = hop.content if method == hop.method else None
        return _Hop(method, target, headers, content)

    def _status_failure(
        self, url: str, status: int, text: str, retry_after: str | None, latency_ms: int
    ) -> CallFailure:
        """``{url} answered {status}: {text}`` (+ Retry-After), keeping a 404's code."""
        try:
            document = parse_json(text)
        except ValueError:
            document = None
        message = trim(text)
        code: str | None = None
        if isinstance(document, dict):
            error = document.get("error")
            if isinstance(error, str):
                message = error
            raw_code = document.get("code")
            if status == 404 and isinstance(raw_code, str):
                code = raw_code
        rendered = f"{url} answered {status}: {message}"
        if retry_after is not None:
            rendered += f" (Retry-After: {retry_after})"
        return self._failure(rendered, status=status, code=code, latency_ms=latency_ms)


_UNFIT: Final = object()
"""What :meth:`TaguruClient._typed` returns for a body the generic path must read."""

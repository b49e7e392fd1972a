"""One run's HTTP client: one ``httpx.AsyncClient`` over one transport.

Everything taguru's own client does to a request and to a failure is pinned
here once (EVALUATE.md §0.4, HTTP.md §2, ERRATA (13b)): per-segment
percent-encoding (:mod:`.urls`), the bearer header, one deadline per call, the
256 MiB body cap (:mod:`.bodies`), no retries, proxies from the environment
(:mod:`.transport`), up to 10 redirects with the ``Authorization`` header
dropped on every one, envelope unwrapping and the exact failure-message shapes
that end up in the artifact. The client knows nothing about cases or metrics.

Server text enters the program here and nowhere else, so this is where it is
made safe: every body has the configured tokens replaced before it is
decoded and, when its text could spell one with JSON escapes, in every decoded
string and key once more, and every failure message additionally has ``Bearer``/``Basic``
credentials and URL userinfo replaced (:meth:`TaguruClient.redact`), before
any artifact, table, report or stderr line can see it.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Final

import httpx

from taguru_eval._base.redact import Redactor
from taguru_eval._base.text import encodable, trim
from taguru_eval.inputs.proxy import ProxyConfig
from taguru_eval.run.http.bodies import LargeBodySlot, Ticket, compact_json, parse_json, read_capped
from taguru_eval.run.http.failures import ureq_text
from taguru_eval.run.http.transport import engine
from taguru_eval.run.http.urls import build_url

REQUEST_TIMEOUT_S: Final = 35.0
# ureq's defaults: follow up to 10 redirects, the 11th is an error.
MAX_REDIRECTS: Final = 10
# Methods ureq will not resend on a 307/308 (it never replays a request body).
_BODY_METHODS: Final = frozenset({"POST", "PUT", "PATCH", "DELETE"})
# Request headers that never follow a redirect (ureq-proto's list, plus the ones
# httpx recomputes for the new target).
_DROPPED_ON_REDIRECT: Final = frozenset(
    {"authorization", "proxy-authorization", "cookie", "content-length", "host"}
)
# A run sends to a handful of URLs; a caller with endless ones stays bounded.
_URL_CACHE_SIZE: Final = 256


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


@dataclass(frozen=True, slots=True)
class Reply:
    """A successful call: the unwrapped payload and how long the exchange took."""

    payload: object
    status: int
    latency_ms: int
    url: str


@dataclass(frozen=True, slots=True)
class RawReply:
    """A response read without envelope handling (``GET /health``)."""

    status: int
    text: str
    latency_ms: int
    url: str


def bearer_headers(token: str | None) -> dict[str, str]:
    """``Authorization: Bearer …`` when a token is configured, else nothing."""
    return {"Authorization": f"Bearer {token}"} if token else {}


def _error_text(exc: BaseException, url: str = "") -> str:
    """A readable description of a library exception (never empty).

    Transports word an unsupported scheme as (a piece of) the URL, which says
    nothing after the ``{url}: `` prefix, so it gets a sentence instead.
    """
    known = ureq_text(exc)
    if known is not None:
        return known
    message = getattr(exc, "message", None)  # aiohttp errors carry the bare reason here
    text = " ".join((message if isinstance(message, str) and message else str(exc)).split())
    if isinstance(exc, httpx.UnsupportedProtocol):
        # aiohttp's refusal of an http(s) URL (a host spelled 127.1, met through a
        # redirect) arrives as this too: its reason then says more than the sentence.
        if url.lower().startswith(("http://", "https://")) and text and text != url:
            return f"invalid URL: {text}"
        return "unsupported or invalid URL (only http:// and https:// can be reached)"
    if not text or text == url:
        return type(exc).__name__
    return text


def _elapsed_ms(started_ns: int) -> int:
    return max(0, (time.monotonic_ns() - started_ns) // 1_000_000)


def _is_redirect(status: int) -> bool:
    """A status ureq follows: any 3xx except 304 (which has no Location)."""
    return 300 <= status < 400 and status != 304


async def _close(response: httpx.Response) -> None:
    with contextlib.suppress(Exception):
        await response.aclose()


class _NoCookies(httpx.Cookies):
    """A cookie jar that never stores or sends anything.

    taguru's client keeps no cookies and the server sets none; httpx would
    still run the stdlib cookie machinery on every response: about a third of
    httpx's own work per call.
    """

    def extract_cookies(self, response: httpx.Response) -> None:
        return None

    def set_cookie_header(self, request: httpx.Request) -> None:
        return None


class _CookielessClient(httpx.AsyncClient):
    """``httpx.AsyncClient`` whose public ``cookies`` jar is :class:`_NoCookies`."""

    _no_cookies = _NoCookies()

    @property
    def cookies(self) -> httpx.Cookies:
        return self._no_cookies

    @cookies.setter
    def cookies(self, cookies: object) -> None:
        del cookies


class TaguruClient:
    """One run's HTTP client. Use as ``async with TaguruClient(...) as client``.

    No call is ever retried; a ``Retry-After`` header only lands in the message.
    ``secrets`` are the tokens to redact from server text (the sent ``token`` is
    always among them); ``proxies`` route requests as taguru's client would
    (ignored when a ``transport`` is injected).
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
        self._parsed: dict[str, httpx.URL] = {}
        # httpx's per-phase timeouts are off: the reference has one deadline for
        # connect + send + receive, redirects included, kept by asyncio.timeout.
        self._http = _CookielessClient(
            transport=engine(max(1, max_connections), proxies) if transport is None else transport,
            headers=bearer_headers(token),
            timeout=None,
            follow_redirects=False,
            trust_env=False,
        )
        # Every request carries the client's headers and nothing per call but a
        # body's type, so both sets are merged once (build_request merges per call).
        self._headers = httpx.Headers(self._http.headers)
        self._json_headers = httpx.Headers(self._http.headers)
        self._json_headers["Content-Type"] = "application/json"

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
        await self._http.aclose()

    def redact(self, text: str) -> str:
        """Server text made safe to store and show: tokens, ``Bearer``/``Basic``
        credentials and URL userinfo replaced, lone surrogates spelled out."""
        return encodable(self._redactor.message(text))

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
            if len(self._built) < _URL_CACHE_SIZE:
                self._built[key] = url
        return url

    async def get(self, segments: Sequence[str], query: Sequence[tuple[str, str]] = ()) -> Reply:
        """``GET`` an enveloped route; raises :class:`CallFailure`."""
        return await self._enveloped("GET", self.url(segments, query), None)

    async def post(self, segments: Sequence[str], body: Mapping[str, object]) -> Reply:
        """``POST`` compact JSON to an enveloped route; raises :class:`CallFailure`."""
        return await self._enveloped("POST", self.url(segments), body)

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
            status, data, headers = await self._exchange(
                "GET", url, None, timeout_s, started, ticket
            )
            text = self._decode(url, data, started)
            del data
            if status != 200:
                raise self._status_failure(url, status, text, headers, _elapsed_ms(started))
        finally:
            ticket.release()
        return RawReply(status=status, text=text, latency_ms=_elapsed_ms(started), url=url)

    async def _enveloped(self, method: str, url: str, body: Mapping[str, object] | None) -> Reply:
        started = time.monotonic_ns()
        ticket = self._large_bodies.ticket()
        try:
            status, data, headers = await self._exchange(method, url, body, None, started, ticket)
            text = self._decode(url, data, started)
            del data
            if status != 200:
                raise self._status_failure(url, status, text, headers, _elapsed_ms(started))
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

    def _decode(self, url: str, data: bytearray, started: int) -> str:
        """The body as text, with every configured token already replaced."""
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            reason = _error_text(exc)
        else:
            return self._redactor.body(text)
        # Raised outside the handler (the decode error holds a copy of the body, and
        # would be the failure's __context__), and with the body emptied: the
        # failure's traceback keeps the callers' frames, and this buffer with them.
        data.clear()
        raise self._failure(
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
    ) -> tuple[int, bytearray, httpx.Headers]:
        """Send one request (following redirects) and read its whole body, within
        one overall deadline."""
        limit = self._timeout_s if timeout_s is None else timeout_s
        try:
            request = self._request(method, url, None if body is None else compact_json(body))
        except (httpx.HTTPError, httpx.InvalidURL, ValueError) as exc:
            raise self._failure(f"{url}: {_error_text(exc, url)}") from None
        response: httpx.Response | None = None
        data: bytearray | None = None
        # Failures are raised after their handlers, never inside one: an exception
        # raised while another is handled keeps it as __context__, and with it the
        # traceback's frames and whatever they held (a body read up to the cap).
        failure: CallFailure | None = None
        try:
            async with asyncio.timeout(limit):
                response = await self._send_following(request, url, started)
                try:
                    data = await read_capped(response, ticket)
                except Exception as exc:
                    failure = self._failure(
                        f"{url}: unreadable response: {_error_text(exc)}",
                        status=response.status_code,
                        latency_ms=_elapsed_ms(started),
                    )
                finally:
                    await _close(response)
        except TimeoutError:
            # Past the deadline while reading the body once the answer had begun.
            what = "unreadable response: " if response is not None else ""
            failure = self._failure(
                f"{url}: {what}timed out after {limit:g} s", latency_ms=_elapsed_ms(started)
            )
        if failure is not None:
            raise failure
        assert response is not None and data is not None  # read, or failed above
        return response.status_code, data, response.headers

    def _request(self, method: str, url: str, content: bytes | None) -> httpx.Request:
        """The request for ``url`` (its text parsed once: a run repeats a handful)."""
        parsed = self._parsed.get(url)
        if parsed is None:
            parsed = httpx.URL(url)
            if len(self._parsed) < _URL_CACHE_SIZE:
                self._parsed[url] = parsed
        headers = self._headers if content is None else self._json_headers
        return httpx.Request(method, parsed, content=content, headers=headers)

    async def _send_following(
        self, request: httpx.Request, url: str, started: int
    ) -> httpx.Response:
        """Send ``request``, following up to :data:`MAX_REDIRECTS` redirects as ureq does.

        Any 3xx but 304 is a redirect. Failures name ``url``, the URL the
        caller asked for, whichever hop failed.
        """
        for hops in range(MAX_REDIRECTS + 1):
            # The transport is the boundary: whatever it raises (httpx's own
            # errors, or an unmapped aiohttp error for a malformed response) is
            # this call's failure, never a crash.
            try:
                response = await self._http.send(request, stream=True)
            except Exception as exc:
                raise self._failure(
                    f"{url}: {_error_text(exc, url)}", latency_ms=_elapsed_ms(started)
                ) from None
            if not _is_redirect(response.status_code):
                return response
            await _close(response)
            if hops == MAX_REDIRECTS:
                break
            request = self._redirected(request, response, url, started)
        raise self._failure(f"{url}: too many redirects", latency_ms=_elapsed_ms(started))

    def _redirected(
        self, request: httpx.Request, response: httpx.Response, url: str, started: int
    ) -> httpx.Request:
        """The request a redirect calls for: ureq's method rules, no credentials."""
        locations = response.headers.get_list("location")
        if not locations:
            raise self._failure(
                f"{url}: protocol: missing a location header", latency_ms=_elapsed_ms(started)
            )
        location = locations[-1]
        try:
            target = request.url.join(location)
        except (httpx.InvalidURL, ValueError):
            raise self._failure(
                f"{url}: protocol: location header is malformed: {location}",
                latency_ms=_elapsed_ms(started),
            ) from None
        method = request.method
        if response.status_code in (307, 308):
            if method in _BODY_METHODS:  # ureq never resends a body
                raise self._failure(f"{url}: redirect failed", latency_ms=_elapsed_ms(started))
        elif method not in ("GET", "HEAD"):
            method = "GET"
        headers = [
            (name, value)
            for name, value in request.headers.multi_items()
            if name.lower() not in _DROPPED_ON_REDIRECT
        ]
        content = request.content if method == request.method else None
        try:
            redirected = self._http.build_request(method, target, content=content, headers=headers)
        except (httpx.HTTPError, httpx.InvalidURL, ValueError) as exc:
            raise self._failure(
                f"{url}: {_error_text(exc, url)}", latency_ms=_elapsed_ms(started)
            ) from None
        # build_request adds the client's own headers back: the token stays behind.
        redirected.headers.pop("authorization", None)
        return redirected

    def _status_failure(
        self, url: str, status: int, text: str, headers: httpx.Headers, latency_ms: int
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
        retry_after = headers.get("retry-after")
        if retry_after is not None:
            rendered += f" (Retry-After: {retry_after})"
        return self._failure(rendered, status=status, code=code, latency_ms=latency_ms)

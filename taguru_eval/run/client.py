"""The HTTP client of run mode: one shared ``httpx.AsyncClient`` per run.

Everything taguru's own client does to a request and to a failure is pinned
here once (EVALUATE.md §0.4, HTTP.md §2, ERRATA (13b)): per-segment
percent-encoding, the bearer header, the 35 s / 4 s timeouts, the 256 MiB body
cap, no retries, proxies from the environment, up to 10 redirects with the
``Authorization`` header dropped on every one, envelope unwrapping and the
exact failure-message shapes that end up in the artifact. The client knows
nothing about cases or metrics.

Server text enters the program here and nowhere else, so this is where it is
made safe: every body has the configured tokens replaced before it is
decoded (:meth:`Redactor.body`), and every failure message additionally has
``Bearer``/``Basic`` credentials and URL userinfo replaced
(:meth:`TaguruClient.redact`), before any artifact, table, report or stderr
line can see it.

Memory is bounded per call and across calls: a body is streamed and refused
the moment it passes the cap (or, once past :data:`SMALL_BODY_BYTES`,
announces more with ``Content-Length``), and only one body at a time may grow
past :data:`SMALL_BODY_BYTES`, so at ``--concurrency N`` the buffered bodies
stay under ``N × SMALL_BODY_BYTES + BODY_CAP_BYTES``.

Transport: ``httpx-aiohttp``'s ``AiohttpTransport`` by default, chosen by
measurement (``benchmarks/throughput.py``: a 2,000-case run against a 50 ms
stub at concurrency 64 on the 2-core dev machine): httpx's own pool reached
~100–125 calls/s (8–10 % of the ideal 1,280/s, p50 latency ~350 ms instead of
~52 ms), the aiohttp transport ~960–1,030 calls/s (75–81 %, p50 within +4…12 %
of the sequential run). Without the package the run falls back to httpx's
own transport. Tests inject ``httpx.MockTransport`` or ``httpx.ASGITransport``
through ``transport=``.

With that default transport and no proxy, a call to a plain ``http://`` URL
skips even aiohttp: the client sends aiohttp's bytes over its own keep-alive
connections (:mod:`.plainhttp`), which took the same benchmark from 88–90 % to
94 % of the ideal rate. A call it cannot send, or a server it cannot connect
to, goes to aiohttp's session directly (``_DirectAiohttp``), and a redirect or
an encoded body continues down the httpx path.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING, Final, Literal, NamedTuple, TypeVar
from urllib.parse import quote, urlsplit

import httpx

from taguru_eval._base import jsonstrict
from taguru_eval._base.redact import Redactor
from taguru_eval._base.text import encodable, one_line, trim
from taguru_eval.errors import PREFIX
from taguru_eval.inputs.proxy import SUPPORTED_PROXY_SCHEMES, ProxyConfig
from taguru_eval.run.plainhttp import PlainHttpError, PlainPool, PlainRoute

REQUEST_TIMEOUT_S = 35.0
PROBE_TIMEOUT_S = 4.0
BODY_CAP_BYTES = 256 * 1024 * 1024
# Bodies up to this size are read side by side; a larger one waits for the one
# large-body slot, so concurrency multiplies only this, never the cap.
SMALL_BODY_BYTES = 2 * 1024 * 1024
# ureq's defaults: follow up to 10 redirects, the 11th is an error.
MAX_REDIRECTS: Final = 10
# Methods ureq will not resend on a 307/308 (it never replays a request body).
_BODY_METHODS: Final = frozenset({"POST", "PUT", "PATCH", "DELETE"})
# Request headers that never follow a redirect (ureq-proto's list, plus the ones
# httpx recomputes for the new target).
_DROPPED_ON_REDIRECT: Final = frozenset(
    {"authorization", "proxy-authorization", "cookie", "content-length", "host"}
)
# The taguru version this client claims to speak for the version-skew probe
# (EVALUATE.md §2.6 leaves the choice to the port; the contract is 0.9.3's).
CLAIMED_TAGURU_VERSION = "0.9.3"

# Characters left as-is inside one path segment. The reference's `url` crate
# also leaves `[`, `]`, `^` and `|` alone, but httpx would re-escape those, so
# escaping them here keeps the URL in a message equal to the URL on the wire.
_SEGMENT_SAFE = "!$&'()*+,;=:@-._~"
# application/x-www-form-urlencoded byte set (what `url`'s query_pairs emits).
_FORM_SAFE = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789*-._")
# What the `url` crate percent-encodes in a special URL's query and fragment
# (WHATWG special-query and fragment sets), besides C0 controls, space and non-ASCII.
_QUERY_ESCAPED = frozenset(b"\"#<>'")
_FRAGMENT_ESCAPED = frozenset(b'"<>`')
# A JSON \u escape of a UTF-16 surrogate; only then can a parsed string hold a lone one.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")

if TYPE_CHECKING:  # aiohttp comes with httpx-aiohttp, which a run can do without
    from aiohttp import ClientResponse
    from yarl import URL

TransportName = Literal["aiohttp", "httpx"]
_URL_CACHE_SIZE = 256


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


def _reject_constant(name: str) -> object:
    raise ValueError(f"{name} is not a JSON value")


_READER: Final = json.JSONDecoder(parse_constant=_reject_constant)
_WRITER: Final = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))
"""One reader and one writer for every call (``json.loads``/``dumps`` with options
build a new one each time)."""


def parse_json(text: str) -> object:
    """Parse a response body: no NaN/Infinity literals, no lone surrogate escape,
    a repeated key keeps its last value (EVALUATE.md §0.1); raises ``ValueError``.

    The stdlib reader on purpose: this runs once per call on the hot path,
    and the lanes type every value they read with ``jsonstrict`` afterwards.
    serde refuses a lone ``\\ud800`` escape, so taguru records such a body as
    "not a taguru response"; strings are only walked when the text holds a
    surrogate escape at all.
    """
    if text.startswith("\ufeff"):  # json.loads' own refusal, in its words
        raise json.JSONDecodeError("Unexpected UTF-8 BOM (decode using utf-8-sig)", text, 0)
    try:
        value: object = _READER.decode(text)
    except RecursionError:
        raise ValueError("recursion limit exceeded") from None
    if "\\u" in text and _SURROGATE_ESCAPE.search(text):
        jsonstrict.reject_lone_surrogates(value)
    return value


def encode_segment(segment: str) -> str:
    """Percent-encode ``segment`` as exactly one path segment (``/`` → ``%2F``)."""
    return quote(segment, safe=_SEGMENT_SAFE)


def encode_form(pairs: Sequence[tuple[str, str]]) -> str:
    """Form-encode query pairs (space → ``+``), as the reference's client does."""

    def one(text: str) -> str:
        out: list[str] = []
        for byte in text.encode("utf-8"):
            if byte in _FORM_SAFE:
                out.append(chr(byte))
            elif byte == 0x20:
                out.append("+")
            else:
                out.append(f"%{byte:02X}")
        return "".join(out)

    return "&".join(f"{one(k)}={one(v)}" for k, v in pairs)


def _percent_encode(text: str, escaped: frozenset[int]) -> str:
    """``text`` with C0 controls, space, DEL, non-ASCII and ``escaped`` percent-encoded."""
    out: list[str] = []
    for byte in text.encode("utf-8"):
        if byte <= 0x20 or byte >= 0x7F or byte in escaped:
            out.append(f"%{byte:02X}")
        else:
            out.append(chr(byte))
    return "".join(out)


def build_url(base_url: str, segments: Sequence[str], query: Sequence[tuple[str, str]] = ()) -> str:
    """The full request URL, built as taguru's ``url`` crate builds it.

    The base path takes each segment encoded (a bare ``/`` path takes the
    first one without a second slash); a query the base URL carries is kept
    and the form-encoded pairs are appended after it with ``&``; a fragment
    is kept (it names the URL in messages, and is never sent).
    """
    parts = urlsplit(base_url)
    path = "" if parts.path == "/" else parts.path
    path += "".join("/" + encode_segment(s) for s in segments)
    url = f"{parts.scheme}://{parts.netloc}{path}"
    before_fragment, hashmark, _ = base_url.partition("#")
    pairs = encode_form(query)
    if "?" in before_fragment or pairs:
        kept = _percent_encode(parts.query, _QUERY_ESCAPED)
        url += "?" + "&".join(piece for piece in (kept, pairs) if piece)
    if hashmark:
        url += "#" + _percent_encode(parts.fragment, _FRAGMENT_ESCAPED)
    return url


def bearer_headers(token: str | None) -> dict[str, str]:
    """``Authorization: Bearer …`` when a token is configured, else nothing."""
    return {"Authorization": f"Bearer {token}"} if token else {}


def _error_text(exc: BaseException, url: str = "") -> str:
    """A readable description of a library exception (never empty).

    Transports word an unsupported scheme as (a piece of) the URL, which says
    nothing after the ``{url}: `` prefix, so it gets a sentence instead.
    """
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


def make_transport(
    name: TransportName, max_connections: int, proxy: str | None = None
) -> httpx.AsyncBaseTransport:
    """The transport named ``name``, sized for ``max_connections`` in flight,
    sending every request through ``proxy`` when one is given."""
    limits = httpx.Limits(
        max_connections=max_connections,
        max_keepalive_connections=max_connections,
    )
    via = None if proxy is None else httpx.Proxy(proxy)
    if name == "aiohttp":
        try:
            from httpx_aiohttp import AiohttpTransport
        except ImportError:  # an install without the dependency still runs, just slower
            pass
        else:
            return AiohttpTransport(limits=limits, trust_env=False, proxy=via)
    return httpx.AsyncHTTPTransport(limits=limits, trust_env=False, retries=0, proxy=via)


class _ProxyRouter(httpx.AsyncBaseTransport):
    """Sends each request directly or through the proxy its URL calls for.

    One inner transport (and pool) per route, made on first use. The choice is
    made per request, so a redirect to another host or scheme is routed by its
    own URL, as ureq does.
    """

    def __init__(
        self, proxies: ProxyConfig, factory: Callable[[str | None], httpx.AsyncBaseTransport]
    ) -> None:
        self._proxies = proxies
        self._factory = factory
        self._routes: dict[str | None, httpx.AsyncBaseTransport] = {}

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        host = request.url.host
        if ":" in host:  # an IPv6 literal is matched in its bracketed URL form
            host = f"[{host}]"
        proxy = self._proxies.proxy_for(request.url.scheme, host)
        if proxy is not None:
            scheme = proxy.partition("://")[0]
            if scheme not in SUPPORTED_PROXY_SCHEMES:
                raise httpx.ProxyError(
                    f"proxy scheme '{scheme}' is not supported (only http:// and https:// proxies)"
                )
        transport = self._routes.get(proxy)
        if transport is None:
            transport = self._routes[proxy] = self._factory(proxy)
        return await transport.handle_async_request(request)

    async def aclose(self) -> None:
        for transport in self._routes.values():
            await transport.aclose()


class _NoCookies(httpx.Cookies):
    """A cookie jar that never stores or sends anything.

    taguru's client keeps no cookies and the server sets none; httpx would
    still run the stdlib cookie machinery on every response, which costs
    about a tenth of the client's CPU per call at high concurrency.
    """

    def extract_cookies(self, response: httpx.Response) -> None:
        return None

    def set_cookie_header(self, request: httpx.Request) -> None:
        return None


class _CookielessClient(httpx.AsyncClient):
    _no_cookies = _NoCookies()

    @property
    def cookies(self) -> httpx.Cookies:
        return self._no_cookies

    @cookies.setter
    def cookies(self, cookies: object) -> None:
        del cookies


class _BodyGate:
    """One slot for a body larger than :data:`SMALL_BODY_BYTES` (per client)."""

    def __init__(self) -> None:
        self._slot = asyncio.Lock()

    def ticket(self) -> _Ticket:
        return _Ticket(self._slot)


class _Ticket:
    """One call's claim on the large-body slot: taken while reading, released by
    the caller once the body is decoded and parsed (or the call failed)."""

    __slots__ = ("_slot", "held")

    def __init__(self, slot: asyncio.Lock) -> None:
        self._slot = slot
        self.held = False

    async def acquire(self) -> None:
        await self._slot.acquire()
        self.held = True

    def release(self) -> None:
        if self.held:
            self.held = False
            self._slot.release()


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
        transport_name: TransportName = "aiohttp",
        max_connections: int = 8,
        timeout_s: float = REQUEST_TIMEOUT_S,
        secrets: Iterable[str] = (),
        proxies: ProxyConfig | None = None,
    ) -> None:
        self.base_url = base_url
        self._timeout_s = timeout_s
        self._url_cache: dict[str, httpx.URL] = {}
        self._built_urls: dict[tuple[tuple[str, ...], tuple[tuple[str, str], ...]], str] = {}
        self._redactor = Redactor((token, *secrets))
        self._bodies = _BodyGate()
        connections = max(1, max_connections)
        chosen: httpx.AsyncBaseTransport
        if transport is not None:
            chosen = transport
        elif proxies is not None and proxies.active:
            chosen = _ProxyRouter(
                proxies, lambda proxy: make_transport(transport_name, connections, proxy)
            )
        else:
            chosen = make_transport(transport_name, connections)
        # A client-level header costs nothing per request; _redirected removes it
        # from every redirect, as ureq does.
        self._http = _CookielessClient(
            transport=chosen,
            headers=bearer_headers(token),
            timeout=httpx.Timeout(timeout_s),
            follow_redirects=False,
            trust_env=False,
        )
        # The common path builds its requests from these and hands them to the
        # transport itself (see _new_request and _send_following).
        self._transport = chosen
        # With the plain aiohttp transport (no proxy, nothing injected) the common
        # path goes straight to its aiohttp session (see _exchange_direct).
        self._direct = _DirectAiohttp(chosen) if _DirectAiohttp.serves(chosen) else None
        # ... and a plain-http request goes over this client's own connections (see
        # _exchange_plain): aiohttp's per-call machinery cost the call rate 4-5 points.
        self._plain = (
            None
            if self._direct is None
            else PlainPool(connections, SMALL_BODY_BYTES, BODY_CAP_BYTES, _too_large_text)
        )
        self._wires: dict[tuple[str, str, bool], _Wire] = {}
        self._routes: dict[tuple[str, str, bool], PlainRoute | None] = {}
        self._plain_headers = httpx.Headers(self._http.headers)
        self._json_headers = httpx.Headers(self._http.headers)
        self._json_headers["Content-Type"] = "application/json"
        self._timeouts: dict[float, dict[str, float | None]] = {}

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
        """Close the pools (idempotent)."""
        if self._plain is not None:
            self._plain.close()
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

    def _parsed(self, url: str) -> httpx.URL:
        """``httpx.URL(url)``, parsed once per distinct URL (a run repeats a handful)."""
        return _parsed_once(self._url_cache, url, httpx.URL)

    def url(self, segments: Sequence[str], query: Sequence[tuple[str, str]] = ()) -> str:
        """The request URL for ``segments`` under this client's base URL.

        Memoised: a run sends thousands of requests to a handful of URLs.
        """
        key = (tuple(segments), tuple(query))
        url = self._built_urls.get(key)
        if url is None:
            url = build_url(self.base_url, segments, query)
            if len(self._built_urls) < _URL_CACHE_SIZE:
                self._built_urls[key] = url
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
        ticket = self._bodies.ticket()
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
        ticket = self._bodies.ticket()
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
            raise self._failure(
                f"{url}: unreadable response: {_error_text(exc)}",
                latency_ms=_elapsed_ms(started),
            ) from None
        return self._redactor.body(text)

    async def _exchange(
        self,
        method: str,
        url: str,
        body: Mapping[str, object] | None,
        timeout_s: float | None,
        started: int,
        ticket: _Ticket,
    ) -> tuple[int, bytearray, httpx.Headers]:
        """Send one request (following redirects) and read its whole body, within
        one overall deadline.

        httpx's own timeouts are per phase; the reference has one deadline for
        connect + send + receive (redirects included), so the whole exchange
        runs under ``asyncio.timeout``.
        """
        limit = self._timeout_s if timeout_s is None else timeout_s
        content: bytes | None = None
        if body is not None:
            content = _WRITER.encode(body).encode()
        try:
            if self._direct is not None:
                wire = self._wire(method, url, content)
            else:
                request = self._new_request(method, url, content, limit)
        except (httpx.HTTPError, httpx.InvalidURL, ValueError) as exc:
            raise self._failure(f"{url}: {_error_text(exc, url)}", latency_ms=0) from None
        if self._direct is not None:
            plain = self._plain
            route = None if plain is None else self._route(self._direct, method, wire, content)
            call = _Call(method, url, content, limit, started, ticket)
            if plain is not None and route is not None:
                return await self._exchange_plain(plain, route, self._direct, wire, call)
            return await self._exchange_direct(self._direct, wire, call)
        answered: list[httpx.Response] = []
        try:
            async with asyncio.timeout(limit):
                return await self._follow_and_read(request, url, limit, started, ticket, answered)
        except TimeoutError:
            raise self._timed_out(url, limit, started, bool(answered)) from None

    async def _follow_and_read(
        self,
        request: httpx.Request,
        url: str,
        limit: float,
        started: int,
        ticket: _Ticket,
        answered: list[httpx.Response],
        first: httpx.Response | None = None,
    ) -> tuple[int, bytearray, httpx.Headers]:
        """The httpx path of one exchange: redirects followed, then the whole body
        (the final response is put in ``answered`` before its body is read)."""
        response = await self._send_following(request, url, limit, started, first)
        answered.append(response)
        data = await self._body(
            _read_capped(response, ticket), _closer(response), response.status_code, url, started
        )
        return response.status_code, data, response.headers

    def _timed_out(self, url: str, limit: float, started: int, answered: bool) -> CallFailure:
        """The one deadline passed: while reading the body once the answer had begun."""
        what = "unreadable response: " if answered else ""
        return self._failure(
            f"{url}: {what}timed out after {limit:g} s", latency_ms=_elapsed_ms(started)
        )

    async def _body(
        self,
        reading: Awaitable[bytearray],
        close: Callable[[], Awaitable[None]],
        status: int,
        url: str,
        started: int,
    ) -> bytearray:
        """The body ``reading`` reads, the response closed after; a failure is unreadable."""
        try:
            return await reading
        except Exception as exc:
            raise self._failure(
                f"{url}: unreadable response: {_error_text(exc)}",
                status=status,
                latency_ms=_elapsed_ms(started),
            ) from None
        finally:
            await close()

    def _wire(self, method: str, url: str, content: bytes | None) -> _Wire:
        """What the transport would send for :meth:`_new_request`'s request, built once per
        URL: its URL text and headers (``content-length`` set per call)."""
        key = (method, url, content is None)
        wire = self._wires.get(key)
        if wire is None:
            # Any limit: it only sets httpx's per-phase timeouts, which this path leaves out.
            template = self._new_request(method, url, None if content is None else b"", 1.0)
            wire = _Wire(str(template.url), dict(template.headers.items()))
            if len(self._wires) < _URL_CACHE_SIZE:
                self._wires[key] = wire
        return wire

    def _route(
        self, direct: _DirectAiohttp, method: str, wire: _Wire, content: bytes | None
    ) -> PlainRoute | None:
        """Where and what the plain path sends for ``wire``, once per URL (``None``:
        aiohttp sends it)."""
        key = (method, wire.url, content is None)
        if key in self._routes:
            return self._routes[key]
        parsed = direct.url_of(wire.url)
        route = PlainRoute.of(
            method,
            parsed.scheme,
            parsed.raw_host,
            parsed.port,
            parsed.raw_user is not None or parsed.raw_password is not None,
            parsed.raw_path_qs,
            wire.headers,
        )
        if len(self._routes) < _URL_CACHE_SIZE:
            self._routes[key] = route
        return route

    async def _exchange_plain(
        self,
        plain: PlainPool,
        route: PlainRoute,
        direct: _DirectAiohttp,
        wire: _Wire,
        call: _Call,
    ) -> tuple[int, bytearray, httpx.Headers]:
        """:meth:`_exchange` over this client's own keep-alive connections.

        The request's bytes are aiohttp's for the same call; a connection that
        cannot be opened leaves the call to aiohttp (nothing was sent), so a
        refused or unresolvable server is worded as before. A redirect or a
        ``Content-Encoding`` goes on down the httpx path, as on the direct path.
        """
        method, url, content, limit, started, ticket = call
        connection = None
        read = False
        try:
            async with asyncio.timeout(limit):
                connection = await plain.connection(route.origin)
                if connection is not None:
                    try:
                        answer = await plain.exchange(
                            connection, route.request(content), ticket.acquire
                        )
                    except PlainHttpError as error:
                        if not error.answered:
                            raise self._failure(
                                f"{url}: {error.text}", latency_ms=_elapsed_ms(started)
                            ) from None
                        raise self._failure(
                            f"{url}: unreadable response: {error.text}",
                            status=connection.status,
                            latency_ms=_elapsed_ms(started),
                        ) from None
                    read = True
                    status = answer.status
                    if _is_redirect(status) or answer.header(b"content-encoding") is not None:
                        request = self._new_request(method, url, content, limit)
                        first = httpx.Response(
                            status_code=status,
                            headers=list(answer.raw_headers),
                            content=bytes(answer.body),
                            request=request,
                        )
                        return await self._follow_and_read(
                            request, url, limit, started, ticket, [], first
                        )
        except TimeoutError:
            answered = connection is not None and connection.answered
            raise self._timed_out(url, limit, started, answered) from None
        finally:
            if connection is not None:
                if read:
                    plain.release(route.origin, connection)
                else:
                    connection.close()
        if connection is None:
            return await self._exchange_direct(direct, wire, call)
        headers = _NO_HEADERS if status == 200 else httpx.Headers(list(answer.raw_headers))
        return status, answer.body, headers

    async def _exchange_direct(
        self,
        direct: _DirectAiohttp,
        wire: _Wire,
        call: _Call,
    ) -> tuple[int, bytearray, httpx.Headers]:
        """:meth:`_exchange` over the aiohttp session itself: same outcome, same messages.

        What the transport does per call besides sending (wrap the answer in
        httpx's response and stream objects, run the identity decoder) is
        about a fifth of the client's CPU per call; here the body is read from
        aiohttp directly, under the transport's own mapping of aiohttp's
        errors. A redirect, or a ``Content-Encoding`` (taguru sends none),
        goes on down the httpx path as the transport would have answered it.
        """
        method, url, content, limit, started, ticket = call
        answer: ClientResponse | None = None
        try:
            async with asyncio.timeout(limit):
                try:
                    answer = await direct.send(method, wire, content)
                except Exception as exc:
                    raise self._failure(
                        f"{url}: {_error_text(exc, url)}", latency_ms=_elapsed_ms(started)
                    ) from None
                if _is_redirect(answer.status) or "Content-Encoding" in answer.headers:
                    request = self._new_request(method, url, content, limit)
                    first = _DirectAiohttp.as_httpx(answer, request)
                    return await self._follow_and_read(
                        request, url, limit, started, ticket, [], first
                    )
                data = await self._body(
                    _read_aiohttp(answer, ticket),
                    _aiohttp_closer(answer),
                    answer.status,
                    url,
                    started,
                )
        except TimeoutError:
            raise self._timed_out(url, limit, started, answer is not None) from None
        # The headers only word a failure (Retry-After): not parsed for a 200.
        return answer.status, data, _NO_HEADERS if answer.status == 200 else _headers_of(answer)

    def _new_request(
        self, method: str, url: str, content: bytes | None, limit: float
    ) -> httpx.Request:
        """The request ``self._http.build_request`` would make, without its per-call merging.

        Same headers (the client's, plus ``Content-Type`` for a JSON body), the
        same per-phase timeouts under the one deadline, no cookies (the jar is
        always empty): building it by hand is about a third of the client's
        CPU per call at high concurrency (benchmarks/README.md).
        """
        timeouts = self._timeouts.get(limit)
        if timeouts is None:
            timeouts = self._timeouts[limit] = httpx.Timeout(limit).as_dict()
        return httpx.Request(
            method,
            self._parsed(url),
            content=content,
            headers=self._plain_headers if content is None else self._json_headers,
            extensions={"timeout": timeouts},
        )

    async def _send_following(
        self,
        request: httpx.Request,
        url: str,
        limit: float,
        started: int,
        first: httpx.Response | None = None,
    ) -> httpx.Response:
        """Send ``request``, following up to :data:`MAX_REDIRECTS` redirects as ureq does.

        Any 3xx but 304 is a redirect. Failures name ``url``, the URL the
        caller asked for, whichever hop failed. ``first``: the first hop's
        response, already received (:meth:`_exchange_direct`).
        """
        for hops in range(MAX_REDIRECTS + 1):
            if first is not None:
                response, first = first, None
            else:
                # The transport is the boundary: whatever it raises (httpx's own
                # errors, or an unmapped aiohttp ClientResponseError for a
                # malformed response) is this call's failure, never a crash.
                # Straight to the transport: httpx's send() would add only its
                # auth, redirect and event-hook layers, none of which this client
                # uses (no auth, redirects followed here, no hooks, no cookies).
                try:
                    response = await self._transport.handle_async_request(request)
                    response.request = request
                except Exception as exc:
                    raise self._failure(
                        f"{url}: {_error_text(exc, url)}", latency_ms=_elapsed_ms(started)
                    ) from None
            if not _is_redirect(response.status_code):
                return response
            with contextlib.suppress(Exception):
                await response.aclose()
            if hops == MAX_REDIRECTS:
                break
            request = self._redirected(request, response, url, limit, started)
        raise self._failure(f"{url}: too many redirects", latency_ms=_elapsed_ms(started))

    def _redirected(
        self,
        request: httpx.Request,
        response: httpx.Response,
        url: str,
        limit: float,
        started: int,
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
            redirected = self._http.build_request(
                method, target, content=content, headers=headers, timeout=limit
            )
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


def _is_redirect(status: int) -> bool:
    """A status ureq follows: any 3xx except 304 (which has no Location)."""
    return 300 <= status < 400 and status != 304


class _BodyTooLarge(httpx.HTTPError):
    pass


def _too_large_text() -> str:
    return f"the body exceeds the {BODY_CAP_BYTES // (1024 * 1024)} MiB cap"


def _too_large() -> _BodyTooLarge:
    return _BodyTooLarge(_too_large_text())


async def _read_capped(response: httpx.Response, ticket: _Ticket) -> bytearray:
    """The whole body, refused as soon as it is known to pass :data:`BODY_CAP_BYTES`.

    A body that grows past :data:`SMALL_BODY_BYTES` is refused there if its
    ``Content-Length`` announces more than the cap, and otherwise waits for the
    client's one large-body slot (``ticket``) before it may grow further.
    Small bodies (every body of a real run) never look at their headers.
    """
    data = bytearray()
    async for chunk in response.aiter_bytes():
        size = len(data) + len(chunk)
        if size > BODY_CAP_BYTES:
            raise _too_large()
        if size > SMALL_BODY_BYTES and not ticket.held:
            declared = response.headers.get("content-length", "")
            if declared.isdigit() and int(declared) > BODY_CAP_BYTES:
                raise _too_large()
            await ticket.acquire()
        data += chunk
    return data


_NO_HEADERS: Final = httpx.Headers()

_Parsed = TypeVar("_Parsed")


def _parsed_once(cache: dict[str, _Parsed], text: str, parse: Callable[[str], _Parsed]) -> _Parsed:
    """``parse(text)``, kept in ``cache`` while it holds fewer than :data:`_URL_CACHE_SIZE`
    entries (a run sends to a handful of URLs; a caller with endless ones stays bounded)."""
    parsed = cache.get(text)
    if parsed is None:
        parsed = parse(text)
        if len(cache) < _URL_CACHE_SIZE:
            cache[text] = parsed
    return parsed


class _Call(NamedTuple):
    """One exchange as the plain and direct paths take it."""

    method: str
    url: str
    content: bytes | None
    limit: float  # the one deadline, seconds
    started: int  # monotonic_ns when the exchange began
    ticket: _Ticket


@dataclass(frozen=True, slots=True)
class _Wire:
    """A request as the aiohttp transport would send it (``headers`` as httpx hands them over)."""

    url: str
    headers: dict[str, str]


_CHUNK_BYTES: Final = 16 * 1024  # httpx-aiohttp's chunk size


class _DirectAiohttp:
    """The aiohttp session of an ``AiohttpTransport``, sent to without httpx in between.

    Each request goes out exactly as the transport sends it: the same URL
    text, headers, body and session (so the same pool; no per-phase timeouts),
    under httpx-aiohttp's own mapping of aiohttp's errors to httpx's.
    """

    def __init__(self, transport: httpx.AsyncBaseTransport) -> None:
        from aiohttp import ClientSession, ClientTimeout
        from httpx_aiohttp import AiohttpTransport
        from yarl import URL

        assert isinstance(transport, AiohttpTransport)
        self._transport = transport
        self._session_type = ClientSession
        # No per-phase timers: every direct exchange runs under the one overall
        # deadline (asyncio.timeout), which starts first and so always fires first;
        # aiohttp's own timers were two more timer handles per call.
        self._no_timeout = ClientTimeout(total=None)
        self._url_type = URL
        self._urls: dict[str, URL] = {}  # aiohttp parses the URL text each call otherwise

    @staticmethod
    def serves(transport: httpx.AsyncBaseTransport) -> bool:
        """Only the plain aiohttp transport, without a proxy, of an httpx-aiohttp
        that has the parts this path uses (else the httpx path serves it all)."""
        try:
            from httpx_aiohttp import AiohttpTransport
            from httpx_aiohttp.transport import (  # noqa: F401
                AiohttpResponseStream,
                map_aiohttp_exceptions,
            )
        except ImportError:
            return False
        return (
            isinstance(transport, AiohttpTransport)
            and getattr(transport, "proxy", None) is None
            and callable(getattr(transport, "get_client", None))
            and hasattr(transport, "client")
        )

    async def send(self, method: str, wire: _Wire, content: bytes | None) -> ClientResponse:
        """The response (status and headers read, not the body); raises httpx's errors."""
        from httpx_aiohttp.transport import map_aiohttp_exceptions

        transport = self._transport
        if not isinstance(transport.client, self._session_type):
            transport.client = transport.get_client()
        headers = wire.headers
        if content is not None:
            headers = {**headers, "content-length": str(len(content))}
        url = self.url_of(wire.url)
        with map_aiohttp_exceptions():
            answer: ClientResponse = await transport.client.request(
                method=method,
                url=url,
                headers=headers,
                data=content or None,
                allow_redirects=False,
                auto_decompress=False,
                compress=False,
                timeout=self._no_timeout,
                server_hostname=None,  # no sni_hostname extension is ever set here
                proxy=None,
            ).__aenter__()
        return answer

    def url_of(self, text: str) -> URL:
        """Exactly what aiohttp makes of the URL ``text`` (parsed once per URL)."""
        return _parsed_once(self._urls, text, self._url_type)

    @staticmethod
    def as_httpx(answer: ClientResponse, request: httpx.Request) -> httpx.Response:
        """``answer`` as the transport would have returned it."""
        from httpx_aiohttp.transport import AiohttpResponseStream

        extensions = {"http_version": b"HTTP/1.1"}
        if answer.reason:
            extensions["reason_phrase"] = answer.reason.encode()
        return httpx.Response(
            status_code=answer.status,
            headers=answer.raw_headers,
            stream=AiohttpResponseStream(answer),
            request=request,
            extensions=extensions,
        )


def _headers_of(answer: ClientResponse) -> httpx.Headers:
    return httpx.Headers(answer.raw_headers)


async def _read_aiohttp(answer: ClientResponse, ticket: _Ticket) -> bytearray:
    """:func:`_read_capped` over an aiohttp response (same cap, slot and errors)."""
    from httpx_aiohttp.transport import map_aiohttp_exceptions

    data = bytearray()
    with map_aiohttp_exceptions():
        async for chunk in answer.content.iter_chunked(_CHUNK_BYTES):
            size = len(data) + len(chunk)
            if size > BODY_CAP_BYTES:
                raise _too_large()
            if size > SMALL_BODY_BYTES and not ticket.held:
                declared = _headers_of(answer).get("content-length", "")
                if declared.isdigit() and int(declared) > BODY_CAP_BYTES:
                    raise _too_large()
                await ticket.acquire()
            data += chunk
    return data


def _closer(response: httpx.Response) -> Callable[[], Awaitable[None]]:
    async def close() -> None:
        with contextlib.suppress(Exception):
            await response.aclose()

    return close


def _aiohttp_closer(answer: ClientResponse) -> Callable[[], Awaitable[None]]:
    """Releases the connection, as the transport's stream does when closed."""
    from httpx_aiohttp.transport import map_aiohttp_exceptions

    async def close() -> None:
        with contextlib.suppress(Exception), map_aiohttp_exceptions():
            await answer.__aexit__(None, None, None)

    return close


def skew_warning(body: str, base_url: str, cli_version: str = CLAIMED_TAGURU_VERSION) -> str | None:
    """The version-skew warning for a 200 ``/health`` body, or None (EVALUATE.md §2.6)."""
    tail = (
        "minor versions differ, and pre-1.0 a minor may change response shapes; continuing anyway"
    )
    if trim(body) == "ok":
        return (
            f"{PREFIX}warning: this CLI is {cli_version} but the server at "
            f"{base_url} answers /health as a pre-0.5 server — {tail}"
        )
    try:
        document = parse_json(body)
    except ValueError:
        return None
    if not isinstance(document, dict):
        return None
    version = document.get("version")
    if not isinstance(version, str):
        return None
    server = _major_minor(version)
    ours = _major_minor(cli_version)
    if server is None or ours is None or server == ours:
        return None
    return (
        f"{PREFIX}warning: this CLI is {cli_version} but the server at "
        f"{base_url} runs {version} — {tail}"
    )


def _major_minor(version: str) -> tuple[int, int] | None:
    pieces = version.split(".")
    if len(pieces) < 2:
        return None
    major, minor = pieces[0], pieces[1]
    if not (major.isascii() and major.isdigit() and minor.isascii() and minor.isdigit()):
        return None
    return int(major), int(minor)


async def probe_version(client: TaguruClient) -> str | None:
    """Best-effort ``GET /health`` with the 4 s timeout; the warning line or None.

    The line quotes the server's version string, so it is redacted and escaped
    to one line like any other server text.
    """
    try:
        reply = await client.get_bare(["health"], timeout_s=PROBE_TIMEOUT_S)
    except CallFailure:
        return None
    warning = skew_warning(reply.text, client.base_url)
    return None if warning is None else one_line(client.redact(warning))

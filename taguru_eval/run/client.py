"""The HTTP client of run mode: one shared ``httpx.AsyncClient`` per run.

Everything taguru's own client does to a request and to a failure is pinned
here once (EVALUATE.md §0.4, HTTP.md §2): per-segment percent-encoding, the
bearer header, the 35 s / 4 s timeouts, the 256 MiB body cap, no retries,
envelope unwrapping and the exact failure-message shapes that end up in the
artifact. The client knows nothing about cases or metrics.

Transport: ``httpx-aiohttp``'s ``AiohttpTransport`` by default, chosen by
measurement (``benchmarks/throughput.py``: a 2,000-case run against a 50 ms
stub at concurrency 64 on the 2-core dev machine): httpx's own pool reached
~100–125 calls/s (8–10 % of the ideal 1,280/s, p50 latency ~350 ms instead of
~52 ms), the aiohttp transport ~960–1,030 calls/s (75–81 %, p50 within +4…12 %
of the sequential run). Without the package the run falls back to httpx's
own transport. Tests inject ``httpx.MockTransport`` or ``httpx.ASGITransport``
through ``transport=``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Literal
from urllib.parse import quote, urlsplit, urlunsplit

import httpx

from taguru_eval._base.text import trim
from taguru_eval.errors import PREFIX

REQUEST_TIMEOUT_S = 35.0
PROBE_TIMEOUT_S = 4.0
BODY_CAP_BYTES = 256 * 1024 * 1024
# The taguru version this client claims to speak for the version-skew probe
# (EVALUATE.md §2.6 leaves the choice to the port; the contract is 0.9.3's).
CLAIMED_TAGURU_VERSION = "0.9.3"

# Characters left as-is inside one path segment. The reference's `url` crate
# also leaves `[`, `]`, `^` and `|` alone, but httpx would re-escape those, so
# escaping them here keeps the URL in a message equal to the URL on the wire.
_SEGMENT_SAFE = "!$&'()*+,;=:@-._~"
# application/x-www-form-urlencoded byte set (what `url`'s query_pairs emits).
_FORM_SAFE = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789*-._")

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


def parse_json(text: str) -> object:
    """Parse a response body: no NaN/Infinity literals, a repeated key keeps its
    last value (EVALUATE.md §0.1); raises ``ValueError``.

    Plain ``json.loads`` on purpose: this runs once per call on the hot path,
    and the lanes type every value they read with ``jsonstrict`` afterwards.
    """
    try:
        value: object = json.loads(text, parse_constant=_reject_constant)
    except RecursionError:
        raise ValueError("recursion limit exceeded") from None
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


def build_url(base_url: str, segments: Sequence[str], query: Sequence[tuple[str, str]] = ()) -> str:
    """The full request URL: base, then each segment encoded, then the query."""
    parts = urlsplit(base_url)
    path = parts.path.rstrip("/") + "".join("/" + encode_segment(s) for s in segments)
    return urlunsplit((parts.scheme, parts.netloc, path, encode_form(query), ""))


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
        return "unsupported or invalid URL (only http:// and https:// can be reached)"
    if not text or text == url:
        return type(exc).__name__
    return text


def _elapsed_ms(started_ns: int) -> int:
    return max(0, (time.monotonic_ns() - started_ns) // 1_000_000)


def make_transport(name: TransportName, max_connections: int) -> httpx.AsyncBaseTransport:
    """The transport named ``name``, sized for ``max_connections`` in flight."""
    limits = httpx.Limits(
        max_connections=max_connections,
        max_keepalive_connections=max_connections,
    )
    if name == "aiohttp":
        try:
            from httpx_aiohttp import AiohttpTransport
        except ImportError:  # an install without the dependency still runs, just slower
            pass
        else:
            return AiohttpTransport(limits=limits, trust_env=False)
    return httpx.AsyncHTTPTransport(limits=limits, trust_env=False, retries=0)


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


class TaguruClient:
    """One run's HTTP client. Use as ``async with TaguruClient(...) as client``.

    No call is ever retried; a ``Retry-After`` header only lands in the message.
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
    ) -> None:
        self.base_url = base_url
        self._timeout_s = timeout_s
        self._url_cache: dict[str, httpx.URL] = {}
        self._built_urls: dict[tuple[tuple[str, ...], tuple[tuple[str, str], ...]], str] = {}
        chosen = transport or make_transport(transport_name, max(1, max_connections))
        self._http = _CookielessClient(
            transport=chosen,
            headers=bearer_headers(token),
            timeout=httpx.Timeout(timeout_s),
            follow_redirects=False,
            trust_env=False,
        )

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

    def _parsed(self, url: str) -> httpx.URL:
        """``httpx.URL(url)``, parsed once per distinct URL (a run repeats a handful)."""
        parsed = self._url_cache.get(url)
        if parsed is None:
            parsed = httpx.URL(url)
            if len(self._url_cache) < _URL_CACHE_SIZE:
                self._url_cache[url] = parsed
        return parsed

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
        status, data, headers = await self._exchange("GET", url, None, timeout_s, started)
        text = self._decode(url, data, started)
        if status != 200:
            raise _status_failure(url, status, text, headers, _elapsed_ms(started))
        return RawReply(status=status, text=text, latency_ms=_elapsed_ms(started), url=url)

    async def _enveloped(self, method: str, url: str, body: Mapping[str, object] | None) -> Reply:
        started = time.monotonic_ns()
        status, data, headers = await self._exchange(method, url, body, None, started)
        text = self._decode(url, data, started)
        if status != 200:
            raise _status_failure(url, status, text, headers, _elapsed_ms(started))
        try:
            document = parse_json(text)
        except ValueError:
            document = None
        if not isinstance(document, dict) or "result" not in document:
            raise CallFailure(
                f"{url}: not a taguru response: {trim(text)}",
                status=status,
                latency_ms=_elapsed_ms(started),
            )
        payload: object = document["result"]
        return Reply(payload=payload, status=status, latency_ms=_elapsed_ms(started), url=url)

    def _decode(self, url: str, data: bytes, started: int) -> str:
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise CallFailure(
                f"{url}: unreadable response: {_error_text(exc)}",
                latency_ms=_elapsed_ms(started),
            ) from None

    async def _exchange(
        self,
        method: str,
        url: str,
        body: Mapping[str, object] | None,
        timeout_s: float | None,
        started: int,
    ) -> tuple[int, bytes, httpx.Headers]:
        """Send one request and read its whole body, within one overall deadline.

        httpx's own timeouts are per phase; the reference has one deadline for
        connect + send + receive, so the whole exchange runs under
        ``asyncio.timeout``.
        """
        limit = self._timeout_s if timeout_s is None else timeout_s
        content: bytes | None = None
        headers: dict[str, str] = {}
        if body is not None:
            content = json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()
            headers["Content-Type"] = "application/json"
        try:
            request = self._http.build_request(
                method, self._parsed(url), content=content, headers=headers, timeout=limit
            )
        except (httpx.HTTPError, httpx.InvalidURL, ValueError) as exc:
            raise CallFailure(f"{url}: {_error_text(exc, url)}", latency_ms=0) from None
        response: httpx.Response | None = None
        try:
            async with asyncio.timeout(limit):
                # The transport is the boundary: whatever it raises (httpx's own
                # errors, or an unmapped aiohttp ClientResponseError for a
                # malformed response) is this call's failure, never a crash.
                try:
                    response = await self._http.send(request, stream=True)
                except Exception as exc:
                    raise CallFailure(
                        f"{url}: {_error_text(exc, url)}", latency_ms=_elapsed_ms(started)
                    ) from None
                try:
                    data = await _read_capped(response)
                except Exception as exc:
                    raise CallFailure(
                        f"{url}: unreadable response: {_error_text(exc)}",
                        status=response.status_code,
                        latency_ms=_elapsed_ms(started),
                    ) from None
                finally:
                    with contextlib.suppress(Exception):
                        await response.aclose()
        except TimeoutError:
            what = "unreadable response: " if response is not None else ""
            raise CallFailure(
                f"{url}: {what}timed out after {limit:g} s",
                latency_ms=_elapsed_ms(started),
            ) from None
        return response.status_code, data, response.headers


class _BodyTooLarge(httpx.HTTPError):
    pass


async def _read_capped(response: httpx.Response) -> bytes:
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.aiter_bytes():
        size += len(chunk)
        if size > BODY_CAP_BYTES:
            raise _BodyTooLarge(f"the body exceeds the {BODY_CAP_BYTES // (1024 * 1024)} MiB cap")
        chunks.append(chunk)
    return b"".join(chunks)


def _status_failure(
    url: str, status: int, text: str, headers: httpx.Headers, latency_ms: int
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
    return CallFailure(rendered, status=status, code=code, latency_ms=latency_ms)


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
    """Best-effort ``GET /health`` with the 4 s timeout; the warning line or None."""
    try:
        reply = await client.get_bare(["health"], timeout_s=PROBE_TIMEOUT_S)
    except CallFailure:
        return None
    return skew_warning(reply.text, client.base_url)

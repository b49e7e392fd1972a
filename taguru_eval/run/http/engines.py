"""How one request reaches the wire: aiohttp's own client, or an httpx transport a caller hands in.

An engine sends one request as it is given (the client follows redirects
itself, by ureq's rules) and gives back an :class:`Answer`: the status, the
headers the client reads, and the body read under the cap. What an engine's
library raises is worded by :meth:`Engine.reason`, the text a failure message
quotes after ``{url}: `` (taguru's own words where the cause is known:
:mod:`.failures`).

* :class:`AiohttpEngine` is the run's own: one ``aiohttp.ClientSession``
  (public API only) over a keep-alive pool of ``max_connections``, no cookie
  jar, no library timeouts (the client keeps one deadline per call), each
  request sent directly or through the proxy its URL calls for (ureq's rules,
  :mod:`taguru_eval.inputs.proxy`). httpx's request and response models cost
  more per call than the rest of the client together (``benchmarks/README.md``),
  so the hot path does without them.
* :class:`HttpxEngine` carries the calls over any ``httpx.AsyncBaseTransport``
  (``TaguruClient(transport=…)``, ``taguru_eval.run(transport=…)``): a caller's
  own transport, ``httpx.MockTransport`` in tests, ``httpx.ASGITransport``
  for an in-process server. httpx is imported only then.
"""

from __future__ import annotations

import contextlib
import ssl
from collections.abc import Mapping
from functools import cached_property
from typing import TYPE_CHECKING, Any, Final, Protocol

import aiohttp
import yarl

from taguru_eval.inputs.proxy import SUPPORTED_PROXY_SCHEMES, ProxyConfig
from taguru_eval.run.http import bodies
from taguru_eval.run.http.bodies import Ticket, read_capped
from taguru_eval.run.http.failures import ureq_text

if TYPE_CHECKING:
    import httpx

# A run sends to a handful of URLs; a caller with endless ones stays bounded.
URL_CACHE_SIZE: Final = 256
# httpx's default keep-alive expiry, which the pool had before.
KEEPALIVE_S: Final = 5.0

_UNSUPPORTED_URL: Final = "unsupported or invalid URL (only http:// and https:// can be reached)"


class Answer(Protocol):
    """One response whose head has arrived."""

    @property
    def status(self) -> int: ...

    def header(self, name: str) -> str | None:
        """The header's value (several joined as HTTP joins them), or None."""
        ...

    def header_values(self, name: str) -> list[str]:
        """Every value of the header, in order."""
        ...

    async def body(self, ticket: Ticket) -> bytes | bytearray:
        """The whole decoded body under the cap (:func:`.bodies.read_capped`)."""
        ...

    async def release(self) -> None:
        """Give the connection back, or close it when its body was not read (idempotent)."""
        ...


class Engine(Protocol):
    """Sends one request; says what went wrong in a failure's words."""

    async def send(
        self, method: str, url: str, headers: Mapping[str, str], content: bytes | None
    ) -> Answer: ...

    def reason(self, exc: BaseException, url: str = "") -> str:
        """A readable description of what ``send`` or ``Answer.body`` raised (never empty)."""
        ...

    async def aclose(self) -> None: ...


def _spelled(text: str, exc: BaseException, url: str) -> str:
    """``text`` on one line; the exception's class when it says nothing more than the URL."""
    text = " ".join(text.split())
    if not text or text == url:
        return type(exc).__name__
    return text


def _unsupported(text: str, url: str) -> str:
    """A URL the transport will not reach: its own reason when the URL is an http(s)
    one (a host spelled ``127.1``, met through a redirect), else a sentence: the
    reason would only repeat (a piece of) the URL."""
    if url.lower().startswith(("http://", "https://")) and text and text != url:
        return f"invalid URL: {text}"
    return _UNSUPPORTED_URL


# --------------------------------------------------------------------------- aiohttp


class UnsupportedProxy(Exception):
    """The environment names a proxy whose scheme the engine cannot speak (SOCKS)."""

    def __init__(self, scheme: str) -> None:
        super().__init__(
            f"proxy scheme '{scheme}' is not supported (only http:// and https:// proxies)"
        )


# Errors whose own text (``str``) is their reason; any other aiohttp error carries
# the bare reason in ``message`` (a malformed response, say).
_WORDED_BY_STR: Final = (
    aiohttp.ClientConnectionError,
    aiohttp.ClientPayloadError,
    aiohttp.ClientHttpProxyError,
    aiohttp.ServerTimeoutError,
    UnsupportedProxy,
)


class _AiohttpAnswer:
    __slots__ = ("_response",)

    def __init__(self, response: aiohttp.ClientResponse) -> None:
        self._response = response

    @property
    def status(self) -> int:
        return self._response.status

    def header(self, name: str) -> str | None:
        values = self._response.headers.getall(name, ())
        return ", ".join(values) if values else None

    def header_values(self, name: str) -> list[str]:
        return list(self._response.headers.getall(name, ()))

    async def body(self, ticket: Ticket) -> bytes | bytearray:
        response = self._response
        length = response.content_length
        if (
            length is not None
            and length <= bodies.SMALL_BODY_BYTES
            and length <= bodies.BODY_CAP_BYTES
            and "Content-Encoding" not in response.headers
        ):
            # Declared small and sent as is: read in one go, it cannot grow past the length.
            return await response.read()
        return await read_capped(
            response.content.iter_any(), lambda: response.headers.get("Content-Length"), ticket
        )

    async def release(self) -> None:
        self._response.release()


class AiohttpEngine:
    """The run's engine: one ``aiohttp.ClientSession``, made in the running loop on first use."""

    def __init__(self, max_connections: int, proxies: ProxyConfig | None = None) -> None:
        self._max_connections = max(1, max_connections)
        self._proxies = proxies if proxies is not None and proxies.active else None
        self._session: aiohttp.ClientSession | None = None
        # Each URL parsed once, as aiohttp would parse its text, with its proxy.
        self._routes: dict[str, tuple[yarl.URL | str, str | None]] = {}

    def _open(self) -> aiohttp.ClientSession:
        connector = aiohttp.TCPConnector(
            limit=self._max_connections, limit_per_host=0, keepalive_timeout=KEEPALIVE_S
        )
        self._session = aiohttp.ClientSession(
            connector=connector,
            cookie_jar=aiohttp.DummyCookieJar(),  # taguru's client keeps no cookies
            timeout=aiohttp.ClientTimeout(),  # one deadline per call, kept by the client
            trust_env=False,  # proxies are decided by ureq's rules, per request
        )
        return self._session

    @cached_property
    def _tls(self) -> ssl.SSLContext:
        """The verified context of an ``https://`` call (certifi's roots, as httpx's)."""
        import certifi

        return ssl.create_default_context(cafile=certifi.where())

    def _route(self, url: str) -> tuple[yarl.URL | str, str | None]:
        route = self._routes.get(url)
        if route is not None:
            return route
        target: yarl.URL | str = url
        proxy: str | None = None
        try:
            target = yarl.URL(url)
        except ValueError:
            pass  # aiohttp refuses the text itself, in its own words
        else:
            if self._proxies is not None:
                host = target.host or ""
                if ":" in host:  # an IPv6 literal is matched in its bracketed URL form
                    host = f"[{host}]"
                proxy = self._proxies.proxy_for(target.scheme, host)
        route = (target, proxy)
        if len(self._routes) < URL_CACHE_SIZE:
            self._routes[url] = route
        return route

    async def send(
        self, method: str, url: str, headers: Mapping[str, str], content: bytes | None
    ) -> Answer:
        session = self._session or self._open()
        target, proxy = self._route(url)
        if proxy is not None:
            scheme = proxy.partition("://")[0]
            if scheme not in SUPPORTED_PROXY_SCHEMES:
                raise UnsupportedProxy(scheme)
        tls: ssl.SSLContext | bool = self._tls if url[:6].lower() == "https:" else True
        response = await session.request(
            method,
            target,
            headers=headers,
            data=content,
            allow_redirects=False,
            proxy=proxy,
            ssl=tls,
        )
        return _AiohttpAnswer(response)

    def reason(self, exc: BaseException, url: str = "") -> str:
        known = ureq_text(exc)
        if known is not None:
            return known
        if isinstance(exc, aiohttp.NonHttpUrlClientError | aiohttp.InvalidUrlClientError):
            return _unsupported(" ".join(str(exc).split()), url)
        if isinstance(exc, _WORDED_BY_STR):
            return _spelled(str(exc), exc, url)
        message = getattr(exc, "message", None)
        return _spelled(message if isinstance(message, str) and message else str(exc), exc, url)

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()


# --------------------------------------------------------------------------- httpx


class _HttpxAnswer:
    __slots__ = ("_response",)

    def __init__(self, response: httpx.Response) -> None:
        self._response = response

    @property
    def status(self) -> int:
        return self._response.status_code

    def header(self, name: str) -> str | None:
        value: str | None = self._response.headers.get(name)
        return value

    def header_values(self, name: str) -> list[str]:
        return self._response.headers.get_list(name)

    async def body(self, ticket: Ticket) -> bytes | bytearray:
        response = self._response
        return await read_capped(
            response.aiter_bytes(), lambda: response.headers.get("content-length"), ticket
        )

    async def release(self) -> None:
        # A transport failing to close: the call's outcome stands.
        with contextlib.suppress(Exception):
            await self._response.aclose()


class HttpxEngine:
    """Every call over one ``httpx.AsyncClient`` on a caller's transport (public API only).

    The client's redirects are its own and its per-phase timeouts are off; it
    keeps no cookies (the stdlib machinery httpx runs per response was a third
    of httpx's own work a call).
    """

    def __init__(self, transport: httpx.AsyncBaseTransport) -> None:
        import httpx

        class _NoCookies(httpx.Cookies):
            def extract_cookies(self, response: httpx.Response) -> None:
                return None

            def set_cookie_header(self, request: httpx.Request) -> None:
                return None

        jar = _NoCookies()

        class _CookielessClient(httpx.AsyncClient):
            @property
            def cookies(self) -> httpx.Cookies:
                return jar

            @cookies.setter
            def cookies(self, cookies: object) -> None:
                del cookies

        self._httpx: Any = httpx
        self._http = _CookielessClient(
            transport=transport, timeout=None, follow_redirects=False, trust_env=False
        )
        self._parsed: dict[str, httpx.URL] = {}

    async def send(
        self, method: str, url: str, headers: Mapping[str, str], content: bytes | None
    ) -> Answer:
        parsed = self._parsed.get(url)
        if parsed is None:
            parsed = self._httpx.URL(url)
            if len(self._parsed) < URL_CACHE_SIZE:
                self._parsed[url] = parsed
        request = self._httpx.Request(method, parsed, content=content, headers=headers)
        return _HttpxAnswer(await self._http.send(request, stream=True))

    def reason(self, exc: BaseException, url: str = "") -> str:
        known = ureq_text(exc)  # a transport over aiohttp raises from aiohttp's errors
        if known is not None:
            return known
        message = getattr(exc, "message", None)
        text = " ".join((message if isinstance(message, str) and message else str(exc)).split())
        if isinstance(exc, self._httpx.UnsupportedProtocol):
            return _unsupported(text, url)
        return _spelled(text, exc, url)

    async def aclose(self) -> None:
        await self._http.aclose()

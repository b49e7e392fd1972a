"""aiohttp's own client: what :class:`~.wire.WireEngine` hands over.

An ``https://`` call, one the environment routes through a proxy, a URL whose
request target aiohttp writes its own way, and a connection the wire engine
could not open go through one ``aiohttp.ClientSession`` (public API only) over
a keep-alive pool of ``max_connections``, no cookie jar, no library timeouts
(the client keeps one deadline per call), each request sent directly or
through the proxy its URL calls for (ureq's rules,
:mod:`taguru_eval.inputs.proxy`). aiohttp is imported only when such a call
comes.
"""

from __future__ import annotations

import ssl
from collections.abc import Mapping
from functools import cached_property
from typing import Final

import aiohttp
import yarl

from taguru_eval.inputs.proxy import SUPPORTED_PROXY_SCHEMES, ProxyConfig
from taguru_eval.run.http import bodies
from taguru_eval.run.http.bodies import Ticket, read_capped
from taguru_eval.run.http.engines import KEEPALIVE_S, URL_CACHE_SIZE, Answer, spelled, unsupported
from taguru_eval.run.http.failures import ureq_text


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
            return unsupported(" ".join(str(exc).split()), url)
        if isinstance(exc, _WORDED_BY_STR):
            return spelled(str(exc), exc, url)
        message = getattr(exc, "message", None)
        return spelled(message if isinstance(message, str) and message else str(exc), exc, url)

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()

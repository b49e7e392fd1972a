"""The one transport every call goes through, and the per-request proxy routing.

httpx-aiohttp's ``AiohttpTransport`` (its public constructor only): httpx's
own connection pool serves a 64-wide run of short calls at a fraction of the
rate aiohttp's does (``benchmarks/throughput.py`` measures both). Tests and
benchmarks inject any other ``httpx.AsyncBaseTransport`` through
``TaguruClient(transport=…)``.
"""

from __future__ import annotations

from collections.abc import Callable

import httpx
from httpx_aiohttp import AiohttpTransport

from taguru_eval.inputs.proxy import SUPPORTED_PROXY_SCHEMES, ProxyConfig


def make_transport(max_connections: int, proxy: str | None = None) -> httpx.AsyncBaseTransport:
    """The transport, sized for ``max_connections`` in flight, sending every request
    through ``proxy`` when one is given."""
    limits = httpx.Limits(
        max_connections=max_connections,
        max_keepalive_connections=max_connections,
    )
    via = None if proxy is None else httpx.Proxy(proxy)
    return AiohttpTransport(limits=limits, trust_env=False, proxy=via)


class ProxyRouter(httpx.AsyncBaseTransport):
    """Sends each request directly or through the proxy its URL calls for.

    One inner transport (and pool) per route, made on first use. The choice is
    made per request, so a redirect to another host or scheme is routed by its
    own URL, as ureq does (httpx's ``mounts`` match URL patterns, which cannot
    say ureq's ``NO_PROXY`` rules).
    """

    def __init__(
        self,
        proxies: ProxyConfig,
        factory: Callable[[str | None], httpx.AsyncBaseTransport],
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


def engine(max_connections: int, proxies: ProxyConfig | None) -> httpx.AsyncBaseTransport:
    """The run's transport: routed per request when the environment names a proxy."""
    if proxies is not None and proxies.active:
        return ProxyRouter(proxies, lambda proxy: make_transport(max_connections, proxy))
    return make_transport(max_connections)

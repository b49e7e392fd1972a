"""How one request reaches the wire: the run's own engine, or an httpx transport a caller hands in.

An engine sends one request as it is given (the client follows redirects
itself, by ureq's rules) and gives back an :class:`Answer`: the status, the
headers the client reads, and the body read under the cap. What an engine's
library raises is worded by :meth:`Engine.reason`, the text a failure message
quotes after ``{url}: `` (taguru's own words where the cause is known:
:mod:`.failures`).

* :class:`~.wire.WireEngine` is the run's own: plain ``http://`` calls as
  HTTP/1.1 bytes on pooled keep-alive connections, read by httptools; the
  calls it does not take (``https://``, proxied, a connection it cannot open)
  go through :class:`~.aio.AiohttpEngine`, aiohttp's own client. httpx's
  request and response models, and then aiohttp's, cost more per call than the
  rest of the client together (``benchmarks/README.md``), so the hot path does
  without them.
* :class:`HttpxEngine` carries the calls over any ``httpx.AsyncBaseTransport``
  (``TaguruClient(transport=…)``, ``taguru_eval.run(transport=…)``): a caller's
  own transport, ``httpx.MockTransport`` in tests, ``httpx.ASGITransport``
  for an in-process server. httpx is imported only then.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final, Protocol

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


def spelled(text: str, exc: BaseException, url: str) -> str:
    """``text`` on one line; the exception's class when it says nothing more than the URL."""
    text = " ".join(text.split())
    if not text or text == url:
        return type(exc).__name__
    return text


def unsupported(text: str, url: str) -> str:
    """A URL the transport will not reach: its own reason when the URL is an http(s)
    one (a host spelled ``127.1``, met through a redirect), else a sentence: the
    reason would only repeat (a piece of) the URL."""
    if url.lower().startswith(("http://", "https://")) and text and text != url:
        return f"invalid URL: {text}"
    return _UNSUPPORTED_URL


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
            return unsupported(text, url)
        return spelled(text, exc, url)

    async def aclose(self) -> None:
        await self._http.aclose()

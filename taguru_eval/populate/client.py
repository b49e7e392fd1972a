"""``load``'s HTTP client: one synchronous ``httpx.Client`` speaking taguru's public routes.

The URL, token and proxy come resolved as run mode resolves them
(``inputs/config.py``, ``inputs/proxy.py``); request URLs are built as run mode
builds them (``run/http/urls.py``, per-segment percent-encoding). A write is
never retried and never follows a redirect (a redirected write would have to be
sent again). Server text is redacted of every configured token before any
message holds it, and the token is only ever an ``Authorization`` header.

A transport failure is :class:`Unreachable`; any status but 200 is
:class:`Refused`, carrying what the error envelope says (HTTP.md §4.1); the
loader turns both into one line naming the fix.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import Final
from urllib.parse import urlsplit

import httpx

from taguru_eval._base.redact import Redactor
from taguru_eval._base.text import encodable, encode_json
from taguru_eval.inputs.proxy import ProxyConfig
from taguru_eval.run.http.bodies import parse_json
from taguru_eval.run.http.client import bearer_headers
from taguru_eval.run.http.urls import build_url

REQUEST_TIMEOUT_S: Final = 300.0
"""Seconds one request may take: a batch of 1,000 sources is indexed before the
server answers, and the server's own budget (30 s by default on taguru) ends a
slower one with a 408 first."""


class Unreachable(Exception):
    """No HTTP answer: connection refused, DNS, TLS, a proxy failing, or none in time
    (``timed_out``)."""

    def __init__(self, reason: str, *, timed_out: bool = False) -> None:
        super().__init__(reason)
        self.timed_out = timed_out


@dataclass
class Refused(Exception):
    """An answer other than 200 (or a 200 that is no taguru envelope: ``status`` 200,
    ``code`` ``None``). ``error`` is the envelope's ``error`` text, redacted;
    ``issues`` its ``issues`` list; ``body_bytes`` the size of the body sent."""

    status: int
    code: str | None
    error: str
    issues: list[dict[str, object]] = field(default_factory=list)
    issues_total: int = 0
    integrity: str | None = None
    body_bytes: int = 0

    def first_issue_path(self) -> str | None:
        path = self.issues[0].get("path") if self.issues else None
        return path if isinstance(path, str) else None

    def detail(self) -> str:
        """The server's reason on one line: the first issue (and how many more),
        else its ``error`` text with its line breaks folded."""
        if self.issues:
            first = self.issues[0]
            text = (
                f"{first.get('path')}: expected {first.get('expected')}, got {first.get('actual')}"
            )
            more = max(self.issues_total, len(self.issues)) - 1
            return text + (f" (and {more} more issue(s))" if more > 0 else "")
        return " ".join(self.error.split()) or "(no reason given)"

    def status_text(self) -> str:
        return f"{self.status} {self.code}" if self.code else str(self.status)


class WriteClient:
    """One server's client for ``load``; use as ``with WriteClient(...) as client``."""

    def __init__(
        self,
        base_url: str,
        token: str | None,
        *,
        secrets: Sequence[str] = (),
        proxies: ProxyConfig | None = None,
        transport: httpx.BaseTransport | None = None,
        timeout_s: float = REQUEST_TIMEOUT_S,
    ) -> None:
        self.base_url = base_url
        self.redactor = Redactor((token, *secrets))
        parts = urlsplit(base_url)
        host = parts.hostname or ""
        if ":" in host:  # an IPv6 literal is matched in its bracketed URL form
            host = f"[{host}]"
        proxy = None if proxies is None else proxies.proxy_for(parts.scheme, host)
        # trust_env off: the proxy is decided above, by run mode's rules, not httpx's.
        self._http = httpx.Client(
            headers=bearer_headers(token),
            timeout=timeout_s,
            follow_redirects=False,
            trust_env=False,
            transport=transport,
            proxy=None if transport is not None else proxy,
        )

    def __enter__(self) -> WriteClient:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._http.close()

    def redact(self, text: str) -> str:
        """Server or transport text made safe to show: tokens, credentials, userinfo."""
        return encodable(self.redactor.message(text))

    def call(
        self,
        method: str,
        segments: Sequence[str],
        body: object = None,
        *,
        query: Sequence[tuple[str, str]] = (),
    ) -> tuple[object, int]:
        """Send one request; returns the envelope's ``result`` and the body's size.

        Raises :class:`Unreachable` or :class:`Refused`.
        """
        content = None if body is None else encode_json(body)
        headers = {} if content is None else {"Content-Type": "application/json"}
        url = build_url(self.base_url, segments, query)
        try:
            response = self._http.request(method, url, content=content, headers=headers)
        except httpx.HTTPError as exc:
            reason = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
            timed_out = isinstance(exc, httpx.TimeoutException)
            raise Unreachable(self.redact(reason), timed_out=timed_out) from None
        sent = 0 if content is None else len(content)
        text = self.redactor.body(response.text)
        try:
            document = parse_json(text)
        except ValueError:
            document = None
        if response.status_code == 200 and isinstance(document, dict) and "result" in document:
            return document["result"], sent
        raise _refusal(response, document, text, self, sent)


def _refusal(
    response: httpx.Response, document: object, text: str, client: WriteClient, sent: int
) -> Refused:
    """What a non-200 (or non-envelope) answer says, redacted."""
    if not isinstance(document, dict):
        location = response.headers.get("location")
        what = (
            f"a redirect to {location} (load follows none: pass that URL with --url)"
            if location
            else f"not a taguru response: {text[:200]}"
        )
        return Refused(response.status_code, None, client.redact(what), body_bytes=sent)
    code = document.get("code")
    error = document.get("error")
    issues = document.get("issues")
    total = document.get("issues_total")
    integrity = document.get("integrity")
    return Refused(
        status=response.status_code,
        code=code if isinstance(code, str) else None,
        error=client.redact(error if isinstance(error, str) else text[:200]),
        issues=[
            {key: client.redact(str(value)) for key, value in issue.items()}
            for issue in (issues if isinstance(issues, list) else [])
            if isinstance(issue, dict)
        ],
        issues_total=total if isinstance(total, int) else 0,
        integrity=integrity if isinstance(integrity, str) else None,
        body_bytes=sent,
    )

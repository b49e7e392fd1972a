"""Waiting for a server to answer ``GET /health`` with 200: a CI step that cannot race.

``python -m taguru_eval wait URL`` (or ``wait --ready-file PATH``) replaces the
``serve … & sleep 3`` of a CI script: it polls the URL's ``/health`` until the
server answers 200, or gives up after a timeout with one line saying what the
last attempt got. With a ready file (``serve --ready-file``) it first waits for
the file and takes the URL from it, re-reading it every attempt, so a file
replaced by a newer server is followed.

Each attempt is one plain GET through httpx with the environment's proxy
settings read the way run mode reads them (:mod:`taguru_eval.inputs.proxy`),
so what ``wait`` reaches is what the run that follows will reach.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final
from urllib.parse import urlsplit, urlunsplit

import httpx

from taguru_eval._base.ready import read_ready_file
from taguru_eval._base.signals import check
from taguru_eval.errors import InputError, RunError, os_error_text
from taguru_eval.inputs.proxy import ProxyConfig, proxy_config

DEFAULT_TIMEOUT_S: Final = 30.0
POLL_INTERVAL_S: Final = 0.1
"""Pause between two attempts: short against a server's start-up, long enough
not to spin."""
ATTEMPT_TIMEOUT_S: Final = 5.0
"""The most one attempt may take (less when the deadline is nearer)."""


def health_url(base_url: str) -> str:
    """``base_url`` + ``/health`` (trailing ``/`` of the base removed, a query kept).

    ``InputError`` for anything but an ``http://``/``https://`` URL with a host,
    or one carrying ``user:password@`` (refused as run mode refuses it).
    """
    parts = urlsplit(base_url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InputError(f"not an http:// or https:// URL with a host: {base_url!r}")
    if "@" in parts.netloc:
        raise InputError("the URL must not carry user:password@")
    return urlunsplit(parts._replace(path=parts.path.rstrip("/") + "/health", fragment=""))


@dataclass
class _Attempts:
    """The last thing an attempt saw, for the timeout message."""

    last: str = "no attempt finished"


def _attempt(url: str, proxies: ProxyConfig, timeout: float, seen: _Attempts) -> bool:
    parts = urlsplit(url)
    proxy = proxies.proxy_for(parts.scheme, parts.hostname or "")
    try:
        # trust_env off: the proxy is decided above, by run mode's rules, not httpx's.
        response = httpx.get(url, timeout=timeout, proxy=proxy, trust_env=False)
    except httpx.HTTPError as exc:
        seen.last = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        return False
    if response.status_code == 200:
        return True
    seen.last = f"HTTP {response.status_code}"
    return False


def _ready_url(path: Path) -> str | None:
    """The URL in the ready file at ``path``, ``None`` while it does not exist."""
    try:
        ready = read_ready_file(path)
    except ValueError as exc:
        raise InputError(f"{path}: {exc}") from None
    except OSError as exc:
        raise InputError(f"{path}: {os_error_text(exc)}") from None
    return None if ready is None else ready.url


def wait_until_healthy(
    url: str | None = None,
    *,
    ready_file: Path | None = None,
    timeout: float = DEFAULT_TIMEOUT_S,
    env: Mapping[str, str] | None = None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> str:
    """Poll ``GET {url}/health`` until it answers 200; return the server's base URL.

    Exactly one of ``url`` and ``ready_file`` is given; with ``ready_file`` the
    URL is the file's (see :mod:`taguru_eval._base.ready`), waited for first.
    ``timeout`` (seconds) bounds the whole wait: past it, ``RunError`` (exit 1)
    names the URL and what the last attempt got. A bad URL or a file that is
    not a ready file is ``InputError`` (exit 2). ``env`` (default: none set)
    supplies the proxy variables.
    """
    if (url is None) == (ready_file is None):
        raise InputError("give the server's URL or --ready-file PATH (one of them)")
    fixed = None if url is None else health_url(url)
    proxies = proxy_config(env or {})
    deadline = clock() + timeout
    seen = _Attempts()
    while True:
        check()  # a stop signal ends the wait between attempts
        base = url
        if ready_file is not None:
            base = _ready_url(ready_file)
        if base is not None:
            target = fixed or health_url(base)
            budget = min(ATTEMPT_TIMEOUT_S, max(deadline - clock(), 0.05))
            if _attempt(target, proxies, budget, seen):
                return base.rstrip("/")
        remaining = deadline - clock()
        if remaining <= 0:
            break
        sleep(min(POLL_INTERVAL_S, remaining))
    shown = f"{timeout:g}"
    if ready_file is not None and base is None:
        raise RunError(f"no ready file {ready_file} within {shown} s")
    assert base is not None
    raise RunError(
        f"{fixed or health_url(base)} did not answer 200 within {shown} s (last: {seen.last})"
    )

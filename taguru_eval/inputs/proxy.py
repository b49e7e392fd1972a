"""Proxy settings read from the environment exactly as taguru's HTTP client reads them.

taguru's client is ureq 3 with its defaults (ERRATA (13b), ``src/remote.rs``):
the proxy for an ``http://`` request is the first of ``HTTP_PROXY``,
``http_proxy``, ``ALL_PROXY``, ``all_proxy`` that is set and parses; for an
``https://`` request ``HTTPS_PROXY``, ``https_proxy``, then the two
``ALL_PROXY`` spellings. ``NO_PROXY`` (else ``no_proxy``; the first one set
wins, even when empty) is a comma-separated list of host patterns, taken
verbatim (no trimming): ``*`` matches every host, ``*.x``/``*x`` and ``.x``
match hosts ending in ``.x``/``x``/``.x``, ``x*`` and ``x.`` match hosts
starting with ``x``/``x.``, anything else is an exact, case-insensitive host.

Like the rest of ``inputs`` this reads a mapping, never ``os.environ``
itself; the environment it is given is the one after ``--config`` was
applied, as taguru builds its client after loading the config file.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

HTTP_PROXY_VARS: Final = ("HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy")
HTTPS_PROXY_VARS: Final = ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy")
NO_PROXY_VARS: Final = ("NO_PROXY", "no_proxy")
PROXY_SCHEMES: Final = frozenset(
    {"http", "https", "socks4", "socks4a", "socks", "socks5", "socks5h"}
)
SUPPORTED_PROXY_SCHEMES: Final = frozenset({"http", "https"})


def parse_proxy_url(value: str) -> str | None:
    """The proxy as an absolute URL (``http://`` added when no scheme is given), or None.

    None when the value has no host or names a scheme ureq does not know,
    in which case ureq moves on to the next variable.
    """
    scheme, sep, rest = value.partition("://")
    if not sep:
        scheme, rest = "http", value
    scheme = scheme.lower()
    if scheme not in PROXY_SCHEMES:
        return None
    authority = rest.split("/", 1)[0].split("?", 1)[0].split("#", 1)[0]
    host = authority.rpartition("@")[2]
    if not host or any(ch.isspace() for ch in authority):
        return None
    if host.startswith("["):
        if "]" not in host:
            return None
    elif host.startswith(":") or host.count(":") > 1:
        return None
    return f"{scheme}://{authority}"


@dataclass(frozen=True, slots=True)
class NoProxyEntry:
    """One ``NO_PROXY`` pattern: ``kind`` is all/exact/suffix/prefix."""

    kind: str
    text: str = ""

    @classmethod
    def parse(cls, entry: str) -> NoProxyEntry:
        if entry == "*":
            return cls("all")
        if entry.startswith("*"):
            return cls("suffix", entry[1:].lower())
        if entry.startswith("."):
            return cls("suffix", entry.lower())
        if entry.endswith("*"):
            return cls("prefix", entry[:-1].lower())
        if entry.endswith("."):
            return cls("prefix", entry.lower())
        return cls("exact", entry.lower())

    def matches(self, host: str) -> bool:
        host = host.lower()
        if self.kind == "all":
            return True
        if self.kind == "suffix":
            return host.endswith(self.text)
        if self.kind == "prefix":
            return host.startswith(self.text)
        return host == self.text


@dataclass(frozen=True, slots=True)
class ProxyConfig:
    """Which proxy (if any) a request to a given URL goes through."""

    http: str | None = None
    https: str | None = None
    no_proxy: tuple[NoProxyEntry, ...] = ()

    @property
    def active(self) -> bool:
        """True when some request could go through a proxy."""
        return self.http is not None or self.https is not None

    def proxy_for(self, scheme: str, host: str) -> str | None:
        """The proxy URL for a request to ``scheme://host``, or None to connect directly."""
        proxy = self.https if scheme == "https" else self.http if scheme == "http" else None
        if proxy is None or any(entry.matches(host) for entry in self.no_proxy):
            return None
        return proxy


def _first_proxy(env: Mapping[str, str], names: tuple[str, ...]) -> str | None:
    for name in names:
        value = env.get(name)
        if value is not None:
            parsed = parse_proxy_url(value)
            if parsed is not None:
                return parsed
    return None


def proxy_config(env: Mapping[str, str]) -> ProxyConfig:
    """The proxy settings ``env`` holds (no variable set: no proxy at all)."""
    no_proxy: tuple[NoProxyEntry, ...] = ()
    for name in NO_PROXY_VARS:
        value = env.get(name)
        if value is not None:
            no_proxy = tuple(NoProxyEntry.parse(entry) for entry in value.split(","))
            break
    return ProxyConfig(
        http=_first_proxy(env, HTTP_PROXY_VARS),
        https=_first_proxy(env, HTTPS_PROXY_VARS),
        no_proxy=no_proxy,
    )

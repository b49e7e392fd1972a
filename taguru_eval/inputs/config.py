"""Config file, base URL, URL masking and bearer token (EVALUATE.md §2.4, §2.5, §0.4).

Nothing here touches ``os.environ``: every function takes the environment as
a mapping and :func:`apply_config_file` returns a new one, so tests and
library callers stay isolated. The CLI passes ``os.environ``.

Messages follow the reference exactly. Config-file errors carry their own
``taguru: …`` prefix (ERRATA (4)) and are raised as :class:`ConfigError`,
which the CLI prints verbatim; URL errors are plain :class:`InputError` text
that the CLI prefixes with ``taguru: evaluate: ``.
"""

from __future__ import annotations

import ipaddress
import re
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Final
from urllib.parse import urlsplit

from taguru_eval._base.filebytes import file_bytes
from taguru_eval._base.redact import REDACTED
from taguru_eval._base.text import one_line, parse_decimal, split_lines, trim
from taguru_eval.contract import CONFIG_CAP
from taguru_eval.errors import InputError, os_error_text

DEFAULT_ADDR: Final = "127.0.0.1:8248"
UNPARSEABLE_MASK: Final = "<unparseable-url>"
CONFIG_ENV: Final = "TAGURU_CONFIG"
ADDR_ENV: Final = "TAGURU_ADDR"
TOKEN_ENV: Final = "TAGURU_API_TOKEN"
TOKENS_ENV: Final = "TAGURU_API_TOKENS"

_CONFIG_HINT: Final = " — try 'taguru --help'"
# A variable holding a secret, in any case, as a config line may spell it: the client's
# TAGURU_API_TOKEN(S), and the server's own keys a shared file may hold
# (TAGURU_EMBED_API_KEY, TAGURU_RERANK_API_KEY, …).
_TOKEN_NAME: Final = re.compile(
    r"TAGURU_\w*?(?:TOKENS?|KEYS?|SECRETS?|PASSWORDS?)(?![A-Za-z0-9])", re.IGNORECASE
)

MSG_CREDENTIALS: Final = (
    "the URL must not carry credentials (user:password@…) — "
    "set TAGURU_API_TOKEN (or TAGURU_API_TOKENS) instead"
)
MSG_UNPARSEABLE: Final = "the --url value could not be parsed as a URL"

# Every variable taguru 0.9.7 reads (its config.rs KNOWN_KEYS, 73 names; ERRATA
# row 22): a ``TAGURU_*`` key in a config file that is not one of these earns
# taguru's "typo?" warning. tests/differential/test_config_keys_097.py holds the
# list to the real binary's warnings.
KNOWN_KEYS: Final = frozenset(
    {
        "TAGURU_ADDR",
        "TAGURU_DATA_DIR",
        "TAGURU_CACHE_BYTES",
        "TAGURU_RETRIEVAL_CACHE_BYTES",
        "TAGURU_SEMANTIC_CACHE_THRESHOLD",
        "TAGURU_FLUSH_SECS",
        "TAGURU_WAL",
        "TAGURU_WAL_MAX_BYTES",
        "TAGURU_PASSAGES_WAL_MAX_BYTES",
        "TAGURU_REPLICATE_URL",
        "TAGURU_REPLICATE_INTERVAL_MS",
        "TAGURU_TAKEOVER",
        "TAGURU_REPLICA",
        "TAGURU_WRITER_URL",
        "TAGURU_ROUTE_MAP",
        "TAGURU_API_TOKEN",
        "TAGURU_API_TOKENS",
        "TAGURU_KEY_SCOPES",
        "TAGURU_PUBLIC_URL",
        "TAGURU_MAX_BODY_BYTES",
        "TAGURU_MCP_MAX_RESULT_BYTES",
        "TAGURU_REQUEST_TIMEOUT_SECS",
        "TAGURU_RATE_LIMIT_PER_MIN",
        "TAGURU_AUTH_FAIL_LIMIT_PER_MIN",
        "TAGURU_MAX_CONCURRENT_REQUESTS",
        "TAGURU_MAX_CONCURRENT_HEAVY_OPS",
        "TAGURU_AUTO_COMPACT",
        "TAGURU_AUTO_COMPACT_RATIO",
        "TAGURU_CONTEXT_QUOTAS",
        "TAGURU_CROSS_SEARCH_CONCURRENCY",
        "TAGURU_EMBED_URL",
        "TAGURU_EMBED_MODEL",
        "TAGURU_EMBED_API_KEY",
        "TAGURU_EMBED_TIMEOUT_SECS",
        "TAGURU_EMBED_AUTO",
        "TAGURU_EMBED_PARALLEL",
        "TAGURU_EMBED_PASSAGES",
        "TAGURU_PASSAGE_VECTOR_LIMIT",
        "TAGURU_SEMANTIC_FLOOR",
        "TAGURU_RERANK_URL",
        "TAGURU_RERANK_MODEL",
        "TAGURU_RERANK_API_KEY",
        "TAGURU_RERANK_TIMEOUT_SECS",
        "TAGURU_EXTRACT_URL",
        "TAGURU_EXTRACT_MODEL",
        "TAGURU_EXTRACT_API_KEY",
        "TAGURU_EXTRACT_TIMEOUT_SECS",
        "TAGURU_EXTRACT_PARALLEL",
        "TAGURU_EXTRACT_FACT_BUDGET",
        "TAGURU_EXTRACT_MAX_ATTEMPTS",
        "TAGURU_EXTRACT_CORRECTIVE_CONTEXT_BYTES",
        "TAGURU_EXTRACT_STRUCTURED_OUTPUT",
        "TAGURU_EXTRACT_MAX_OUTPUT_TOKENS",
        "TAGURU_EXTRACT_ESCALATION_FACTOR",
        "TAGURU_EXTRACT_RUNAWAY_RATIO",
        "TAGURU_EXTRACT_CHUNK_BYTES",
        "TAGURU_EXTRACT_CHUNK_CONTEXT",
        "TAGURU_EXTRACT_LOSSY",
        "TAGURU_EXTRACT_CANDIDATES",
        "TAGURU_EXTRACT_REDACT",
        "TAGURU_EXTRACT_REDACT_RULES",
        "TAGURU_EXTRACT_VOCABULARY",
        "TAGURU_EXTRACT_COVERAGE",
        "TAGURU_EXTRACT_DIAGNOSTICS",
        "TAGURU_EXTRACT_DIAGNOSTICS_RAW_BYTES",
        "TAGURU_EXTRACT_TRACE_ATTEMPTS",
        "TAGURU_EXTRACT_SCHEMA",
        "TAGURU_EXTRACT_REPLAY",
        "TAGURU_EXTRACT_REPLAY_FROM",
        "TAGURU_LOG_FORMAT",
        "TAGURU_LOG_SEARCHES",
        "TAGURU_METRICS_PER_CONTEXT",
        "TAGURU_CONFIG",
    }
)

Warn = Callable[[str], None]


class ConfigError(InputError):
    """A bad ``--config`` file; the message is the complete stderr line (taguru's
    own ``taguru: …`` words, ERRATA (4))."""

    carries_prefix = True


def _stderr(line: str) -> None:
    print(line, file=sys.stderr)


# --------------------------------------------------------------------------- config file


def config_path(flag: str | None, env: Mapping[str, str]) -> str | None:
    """``--config FILE`` if given, else ``TAGURU_CONFIG`` if set."""
    if flag is not None:
        return flag
    return env.get(CONFIG_ENV)


def parse_config_file(path: str) -> list[tuple[int, str, str]]:
    """The ``(line, key, value)`` assignments of an env-file, in file order.

    Raises :class:`ConfigError` for an unreadable file, a line without ``=``
    or a bad key name (exit 2).
    """
    try:
        text = file_bytes(path, CONFIG_CAP).decode("utf-8")
    except OSError as exc:
        detail = os_error_text(exc)
        raise ConfigError(
            f"taguru: cannot read config {path}: {detail}{_CONFIG_HINT}", path=path
        ) from None
    except UnicodeDecodeError:
        raise ConfigError(
            f"taguru: cannot read config {path}: stream did not contain valid UTF-8{_CONFIG_HINT}",
            path=path,
        ) from None
    text = text.removeprefix("\ufeff")
    assignments: list[tuple[int, str, str]] = []
    for index, raw in enumerate(split_lines(text)):
        line_no = index + 1
        line = trim(raw)
        if not line or line.startswith("#"):
            continue
        key, equals, value = line.partition("=")
        if not equals:
            raise ConfigError(
                f"taguru: config {path}: line {line_no}: expected KEY=VALUE, "
                f"got '{_shown(raw)}'{_CONFIG_HINT}",
                path=path,
                line=line_no,
            )
        key = trim(key)
        if not key or any(not trim(ch) for ch in key):
            raise ConfigError(
                f"taguru: config {path}: line {line_no}: '{_shown(key)}' is not a variable name"
                f"{_CONFIG_HINT}",
                path=path,
                line=line_no,
                field=key,
            )
        assignments.append((line_no, key, trim(value)))
    return assignments


def _shown(text: str) -> str:
    """``text`` as a config error may echo it: a line naming a token variable is
    most likely ``NAME secret`` (or ``NAME secret=…``, split at the token's own
    ``=``), so only the name is kept and the rest is redacted."""
    match = _TOKEN_NAME.search(text)
    return text if match is None else f"{match.group()} {REDACTED}"


def apply_config_file(path: str, env: Mapping[str, str], warn: Warn = _stderr) -> dict[str, str]:
    """``env`` with the file's values added (EVALUATE.md §2.4 step 1).

    A ``TAGURU_*`` key taguru does not read is flagged as a possible typo, once
    per line (note on stderr); a key already in ``env`` keeps its value (note
    on stderr); a key repeated in the file takes its last value (note on
    stderr). Keys are escaped so every note stays one line.
    """
    values: dict[str, str] = {}
    for _line, key, value in parse_config_file(path):
        shown = one_line(key)
        if key.startswith("TAGURU_") and key not in KNOWN_KEYS:
            warn(f"taguru: config: {shown} is not a variable taguru reads (typo?)")
        if key in values:
            warn(f"taguru: config: {shown} appears more than once in the file; the last value wins")
        values[key] = value
    merged = dict(env)
    for key, value in values.items():
        if key in env:
            warn(
                f"taguru: config: {one_line(key)} set in the environment; the file value is ignored"
            )
        else:
            merged[key] = value
    return merged


def effective_env(
    config_flag: str | None, env: Mapping[str, str], warn: Warn = _stderr
) -> dict[str, str]:
    """The environment after ``--config`` / ``TAGURU_CONFIG`` was applied."""
    path = config_path(config_flag, env)
    if path is None:
        return dict(env)
    return apply_config_file(path, env, warn)


# --------------------------------------------------------------------------- URLs


_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]*):(.*)$", re.DOTALL)
_DEFAULT_PORTS: Final = {"http": 80, "https": 443, "ws": 80, "wss": 443, "ftp": 21}
_SPECIAL: Final = frozenset({*_DEFAULT_PORTS, "file"})
_FORBIDDEN_HOST: Final = frozenset(" #%/:<>?@[\\]^|\t\n\r")
_IPV4_DIGITS: Final = {
    8: frozenset("01234567"),
    10: frozenset("0123456789"),
    16: frozenset("0123456789abcdefABCDEF"),
}


@dataclass(frozen=True, slots=True)
class ParsedUrl:
    """The parts of an absolute URL evaluate looks at (WHATWG-style)."""

    scheme: str
    host: str | None
    port: int | None  # None when absent or the scheme's default
    has_credentials: bool
    # The host as written when it is an IPv4 address spelled other than as its
    # dotted quad (``127.1``, ``0x7f.0.0.1``); ``host`` holds the dotted quad.
    legacy_ipv4: str | None = None


def parse_url(url: str) -> ParsedUrl | None:
    """A small WHATWG-flavoured parser: ``None`` when ``url`` is not an absolute URL.

    A scheme is mandatory; special schemes (http, https, …) need a valid host;
    the host is lower-cased (IDNA for non-ASCII), IPv6 is kept in brackets in
    canonical form, a host ending in a number must be an IPv4 address (any
    WHATWG spelling, normalised to its dotted quad); a default port is dropped;
    a non-numeric or >65535 port fails. Non-special schemes (``localhost:8080``)
    parse, as in WHATWG.
    """
    match = _SCHEME.match(url.strip(" \t\n\r\f\v\x00"))
    if match is None:
        return None
    scheme = match.group(1).lower()
    rest = match.group(2)
    if scheme in _SPECIAL:
        rest = rest.lstrip("/\\")
    elif rest.startswith("//"):
        rest = rest[2:]
    else:
        return ParsedUrl(scheme=scheme, host=None, port=None, has_credentials=False)
    authority = re.split(r"[/?#\\]" if scheme in _SPECIAL else r"[/?#]", rest, maxsplit=1)[0]
    userinfo, at, hostport = authority.rpartition("@")
    has_credentials = bool(at) and userinfo not in ("", ":")
    parsed = _host_port(hostport, scheme)
    if parsed is None:
        return None
    host, port = parsed
    if scheme in _SPECIAL and scheme != "file" and not host:
        return None
    legacy_ipv4 = None
    if scheme in _SPECIAL and _ends_in_number(host):
        dotted = _ipv4(host)
        if dotted is None:
            return None
        if dotted != host:
            legacy_ipv4 = host
        host = dotted
    if port is not None and _DEFAULT_PORTS.get(scheme) == port:
        port = None
    return ParsedUrl(
        scheme=scheme,
        host=host,
        port=port,
        has_credentials=has_credentials,
        legacy_ipv4=legacy_ipv4,
    )


def _ends_in_number(host: str) -> bool:
    """WHATWG's "ends in a number": such a host is an IPv4 address or no host at all."""
    labels = host.split(".")
    if labels[-1] == "" and len(labels) > 1:
        labels.pop()
    last = labels[-1]
    if last and last.isascii() and last.isdigit():
        return True
    return _ipv4_number(last) is not None  # past the digits, only a 0x… label parses


def _ipv4(host: str) -> str | None:
    """WHATWG's IPv4 parser: 1–4 decimal, octal (``0…``) or hex (``0x…``) parts,
    the last filling the remaining bytes; the dotted quad, or None when invalid."""
    labels = host.split(".")
    if labels[-1] == "" and len(labels) > 1:
        labels.pop()
    if len(labels) > 4:
        return None
    numbers = [_ipv4_number(label) for label in labels]
    if None in numbers:
        return None
    parts = [number for number in numbers if number is not None]
    if any(part > 255 for part in parts[:-1]) or parts[-1] >= 256 ** (5 - len(parts)):
        return None
    value = parts[-1] + sum(part * 256 ** (3 - index) for index, part in enumerate(parts[:-1]))
    return str(ipaddress.IPv4Address(value))


def _ipv4_number(label: str) -> int | None:
    if not label:
        return None
    digits, radix = label, 10
    if label[:2] in ("0x", "0X"):
        digits, radix = label[2:], 16
    elif len(label) > 1 and label.startswith("0"):
        digits, radix = label[1:], 8
    if not digits:
        return 0
    if not all(ch in _IPV4_DIGITS[radix] for ch in digits):
        return None
    return int(digits, radix)


def _host_port(text: str, scheme: str) -> tuple[str, int | None] | None:
    if text.startswith("["):
        end = text.find("]")
        if end < 0:
            return None
        try:
            host = f"[{ipaddress.IPv6Address(text[1:end]).compressed}]"
        except ValueError:
            return None
        tail = text[end + 1 :]
        if tail and not tail.startswith(":"):
            return None
        port_text = tail[1:] if tail else ""
    else:
        host, _colon, port_text = text.rpartition(":") if ":" in text else (text, "", "")
        if any(ch in _FORBIDDEN_HOST or ord(ch) < 0x20 for ch in host):
            return None
        if scheme in _SPECIAL:
            try:
                host = host.encode("idna").decode("ascii").lower() if host else ""
            except UnicodeError:
                return None
    port: int | None = None
    if port_text:
        port = parse_decimal(port_text, 65_535)
        if port is None:
            return None
    return host, port


def mask_url(url: str) -> str:
    """``scheme://host[:port]``: no userinfo, path, query or fragment (§2.5)."""
    parsed = parse_url(url)
    if parsed is None:
        return UNPARSEABLE_MASK
    port = "" if parsed.port is None else f":{parsed.port}"
    return f"{parsed.scheme}://{parsed.host or ''}{port}"


def base_url_from_addr(addr: str) -> str:
    """``http://`` + ``TAGURU_ADDR`` with an unspecified IP replaced by loopback.

    Refuses a port-0 address (the real port cannot be known from here) and a
    full URL: taguru would build ``http://http://…``, whose host is ``http``
    and whose ``user:password@`` would slip past the credentials check into
    the request path (a deliberate deviation from taguru, see docs/decisions.md).
    """
    if "://" in addr:
        raise InputError(
            f"TAGURU_ADDR ({mask_url(addr)}) is a URL, but it must be host:port "
            "(the base URL is 'http://' + TAGURU_ADDR); pass a URL with --url instead",
            field=ADDR_ENV,
        )
    result = addr
    socket = _socket_addr(addr)
    if socket is not None:
        ip, port = socket
        if ip.is_unspecified:
            loopback = "127.0.0.1" if ip.version == 4 else "[::1]"
            result = f"{loopback}:{port}"
    if result.endswith(":0"):
        # taguru echoes the value; a ``user:password@`` in it must not reach stderr.
        _userinfo, at, hostport = addr.rpartition("@")
        shown = f"{REDACTED}@{hostport}" if at else addr
        raise InputError(
            f"TAGURU_ADDR ({shown}) binds to port 0 (OS-assigned) — the actual port can't be "
            "discovered from here; pass the server's real URL explicitly: "
            "'taguru health http://host:PORT'",
            field=ADDR_ENV,
        )
    return "http://" + result


def _socket_addr(addr: str) -> tuple[ipaddress.IPv4Address | ipaddress.IPv6Address, str] | None:
    """``(ip, port)`` when ``addr`` is an IP socket address like Rust's SocketAddr."""
    if addr.startswith("["):
        host, sep, port = addr[1:].partition("]:")
        if not sep:
            return None
        try:
            ip: ipaddress.IPv4Address | ipaddress.IPv6Address = ipaddress.IPv6Address(host)
        except ValueError:
            return None
    else:
        host, sep, port = addr.rpartition(":")
        if not sep:
            return None
        try:
            ip = ipaddress.IPv4Address(host)
        except ValueError:
            return None
    if parse_decimal(port, 65_535) is None:
        return None
    return ip, port


def resolve_base_url(url_flag: str | None, env: Mapping[str, str]) -> str:
    """EVALUATE.md §2.4 steps 2–4: the base URL, or an :class:`InputError` (exit 2)."""
    base = url_flag
    if base is None:
        base = base_url_from_addr(env.get(ADDR_ENV, DEFAULT_ADDR))
    parsed = parse_url(base)
    if parsed is not None and parsed.has_credentials:
        raise InputError(MSG_CREDENTIALS, field="url")
    if parsed is None:
        raise InputError(MSG_UNPARSEABLE, field="url", hint=scheme_hint(url_flag))
    if parsed.legacy_ipv4 is not None:
        # taguru's URL parser reads it as the dotted quad; aiohttp refuses to
        # connect to such a spelling at all, so ask for the form both read alike.
        raise InputError(
            f"the URL's host '{parsed.legacy_ipv4}' is the IPv4 address {parsed.host} "
            f"in a form the HTTP client will not connect to; write {parsed.host} instead",
            field="url",
        )
    if not _client_can_parse(base):
        raise InputError(MSG_UNPARSEABLE, field="url", hint=scheme_hint(url_flag))
    return base


_CONTROL: Final = re.compile(r"[\x00-\x1f\x7f]")


def scheme_hint(url_flag: str | None) -> str | None:
    """The fix for a ``--url`` written without its scheme (``127.0.0.1:8248``,
    ``localhost:8080``), or ``None``. The value is not echoed when it carries
    credentials (they are refused before this is asked)."""
    if url_flag is None or "://" in url_flag or not _SCHEMELESS.fullmatch(url_flag):
        return None
    scheme = _SCHEME.match(url_flag)
    if scheme is not None and scheme.group(1).lower() in ("http", "https"):
        return None
    return f"a URL starts with its scheme: add http:// (--url http://{url_flag})"


_SCHEMELESS: Final = re.compile(
    r"[A-Za-z0-9.\-]+(?::[0-9]*)?(?:/\S*)?|\[[0-9A-Fa-f:.]+\](?::[0-9]*)?"
)
"""What a host, a ``host:port`` or a bracketed IPv6 address without a scheme looks
like (``127.0.0.1:8248``, ``localhost:8080/api``, ``[::1]:8248``)."""


def _client_can_parse(base: str) -> bool:
    """Whether the HTTP client's URL parsers take the request URLs built on ``base``.

    The client sends the scheme, authority and path as written (``build_url``
    re-encodes only the query and fragment). aiohttp's parser (yarl) refuses a
    NUL or a port after a backslash in the authority and finds no host in
    ``http:/h`` (WHATWG reads ``h``); httpx's (a transport handed in, a
    redirect's target) also refuses a control character anywhere there, which
    WHATWG would percent-encode. Caught here it is a bad URL (exit 2), not an
    unreachable server (exit 1).
    """
    # Only run mode's URL check needs yarl; the flag parsers that share this
    # module (--help, usage errors) must not load it.
    import yarl

    parts = urlsplit(base)
    sent = f"{parts.scheme}://{parts.netloc}{parts.path}"
    if _CONTROL.search(sent):
        return False
    try:
        url = yarl.URL(sent)
    except ValueError:
        return False
    return bool(url.host) or url.scheme not in ("http", "https")


# --------------------------------------------------------------------------- token


def resolve_secrets(env: Mapping[str, str]) -> tuple[str, ...]:
    """Every token the environment configures: ``TAGURU_API_TOKEN`` and each
    ``name:token`` entry of ``TAGURU_API_TOKENS`` (trimmed, empty ones dropped).

    Only one of them is ever sent, but a server may echo any of them, so all
    of them are redacted from server text.
    """
    tokens = [trim(env.get(TOKEN_ENV, ""))]
    for entry in env.get(TOKENS_ENV, "").split(","):
        _name, colon, token = trim(entry).partition(":")
        if colon:
            tokens.append(trim(token))
    return tuple(dict.fromkeys(token for token in tokens if token))


def resolve_token(env: Mapping[str, str]) -> str | None:
    """The bearer token (§0.4): ``TAGURU_API_TOKEN`` trimmed, else the first
    ``name:token`` entry of ``TAGURU_API_TOKENS`` with a non-empty token.

    Raises :class:`InputError` (exit 2) when that token cannot travel in an
    HTTP header; only the token that is sent is checked.
    """
    single = trim(env.get(TOKEN_ENV, ""))
    if single:
        return _header_safe(single, TOKEN_ENV)
    for number, entry in enumerate(env.get(TOKENS_ENV, "").split(","), start=1):
        _name, colon, token = trim(entry).partition(":")
        if colon and trim(token):
            return _header_safe(trim(token), f"{TOKENS_ENV} (entry {number}, the one sent)")
    return None


def token_source(
    env: Mapping[str, str], outer: Mapping[str, str], config: str | None = None
) -> str | None:
    """Which variable the sent token (:func:`resolve_token`) came from, for a
    401/403 to name: ``TAGURU_API_TOKEN``, ``TAGURU_API_TOKENS (entry 2)``, with
    `` from the config file X`` when ``--config``/``TAGURU_CONFIG`` set it (``env``
    is the environment after the file, ``outer`` before it); ``None`` when no
    token is sent."""
    name: str | None = None
    if trim(env.get(TOKEN_ENV, "")):
        name = TOKEN_ENV
    else:
        for number, entry in enumerate(env.get(TOKENS_ENV, "").split(","), start=1):
            _name, colon, token = trim(entry).partition(":")
            if colon and trim(token):
                name = f"{TOKENS_ENV} (entry {number})"
                break
    if name is None:
        return None
    variable = name.split(" ", 1)[0]
    path = config_path(config, outer)
    if path is not None and env.get(variable) != outer.get(variable):
        return f"{name} from the config file {path}"
    return name


def _header_safe(token: str, source: str) -> str:
    """``token`` if an ``Authorization`` header can carry it, else exit 2.

    Caught here rather than at the first request, where the HTTP library
    crashes (non-ASCII) or words it as an unreachable server (a control
    character). The message names the variable, never the token.
    """
    for ch in token:
        if ch == "\t" or " " <= ch <= "~":
            continue
        what = "a non-ASCII character" if ord(ch) > 0x7F else "a control character"
        raise InputError(
            f"{source} contains {what}, which an HTTP Authorization header cannot carry "
            "(the token itself is not shown)",
            field=source.split(" ", 1)[0],
        )
    return token

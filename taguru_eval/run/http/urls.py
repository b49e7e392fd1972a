"""Request URLs as taguru's client builds them with the ``url`` crate (HTTP.md §2).

Each path segment is percent-encoded on its own (a ``/`` inside a context or
source name becomes ``%2F``), query pairs are form-encoded, and a query or
fragment the base URL carries is kept. This is encoding, not parsing: the
base URL is split by :func:`urllib.parse.urlsplit` and httpx parses the result.
The byte sets are the ``url`` crate's, so a URL quoted in a failure message is
the URL taguru would quote.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final
from urllib.parse import quote, urlsplit

# Characters left as-is inside one path segment. The reference's `url` crate
# also leaves `[`, `]`, `^` and `|` alone, but httpx would re-escape those, so
# escaping them here keeps the URL in a message equal to the URL on the wire.
_SEGMENT_SAFE: Final = "!$&'()*+,;=:@-._~"
# application/x-www-form-urlencoded byte set (what `url`'s query_pairs emits).
_FORM_SAFE: Final = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789*-._")
# What the `url` crate percent-encodes in a special URL's query and fragment
# (WHATWG special-query and fragment sets), besides C0 controls, space and non-ASCII.
_QUERY_ESCAPED: Final = frozenset(b"\"#<>'")
_FRAGMENT_ESCAPED: Final = frozenset(b'"<>`')


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

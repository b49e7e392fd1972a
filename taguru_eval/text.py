"""Text rules shared by the loaders, the scorer and the reference server.

Rust's notion of whitespace and line ends differs from Python's defaults
(``str.strip`` and ``str.splitlines`` treat U+001C–U+001F and more as
whitespace or line breaks), so these helpers pin the reference's rules once.
"""

from __future__ import annotations

import struct

# Unicode White_Space, which is what Rust's str::trim removes (EVALUATE.md §0.2).
WHITE_SPACE = (
    "\u0009\u000a\u000b\u000c\u000d\u0020\u0085\u00a0\u1680"
    "\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a"
    "\u2028\u2029\u202f\u205f\u3000"
)
_WHITE_SPACE_SET = frozenset(WHITE_SPACE)

ELLIPSIS = "\u2026"
ERROR_BYTES_LIMIT = 200


def trim(text: str) -> str:
    """Remove leading and trailing Unicode White_Space (Rust ``str::trim``)."""
    return text.strip(WHITE_SPACE)


def is_blank(text: str) -> bool:
    """True when ``text`` is empty or only Unicode White_Space."""
    return all(ch in _WHITE_SPACE_SET for ch in text)


def split_lines(text: str) -> list[str]:
    """Split on ``\\n`` only, dropping one ``\\r`` before each ``\\n``.

    A trailing newline does not produce an extra empty line, matching Rust's
    ``str::lines``; line numbers are the 1-based indices of the result.
    """
    if not text:
        return []
    parts = text.split("\n")
    if parts[-1] == "":
        parts.pop()
    return [part[:-1] if part.endswith("\r") else part for part in parts]


def truncate_utf8(message: str, limit: int = ERROR_BYTES_LIMIT) -> str:
    """Cut ``message`` at the last UTF-8 boundary within ``limit`` bytes and add ``…``.

    Messages that already fit are returned unchanged (EVALUATE.md §0.3).
    """
    encoded = message.encode("utf-8")
    if len(encoded) <= limit:
        return message
    return encoded[:limit].decode("utf-8", errors="ignore") + ELLIPSIS


def to_f32(value: float) -> float:
    """Round a Python float to the nearest IEEE-754 binary32 value."""
    result: float = struct.unpack("<f", struct.pack("<f", value))[0]
    return result


def format_f32(value: float) -> str:
    """Shortest decimal text that round-trips ``value`` as a binary32.

    Integral values keep no decimal point and no exponent is ever used, which is
    how the reference prints an f32 in messages (``1.5``, ``2``, ``-0.5``).
    """
    f32 = to_f32(value)
    if f32 != f32 or f32 in (float("inf"), float("-inf")):
        return repr(f32)
    for digits in range(1, 10):
        candidate = f"{f32:.{digits}g}"
        if to_f32(float(candidate)) == f32:
            text = _plain_decimal(candidate)
            break
    else:  # pragma: no cover - 9 significant digits always round-trip a binary32
        text = _plain_decimal(repr(f32))
    return text


def _plain_decimal(text: str) -> str:
    """Rewrite ``1e-05``-style text as a plain decimal, and ``2.0`` as ``2``."""
    from decimal import Decimal

    plain = format(Decimal(text), "f")
    if "." in plain:
        plain = plain.rstrip("0").rstrip(".")
    if plain in ("-0", ""):
        plain = "-0" if text.startswith("-") else "0"
    return plain

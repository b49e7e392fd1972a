"""Text rules shared by the loaders, the scorer and the reference server.

Rust's notion of whitespace and line ends differs from Python's defaults
(``str.strip`` and ``str.splitlines`` treat U+001C–U+001F and more as
whitespace or line breaks), so these helpers pin the reference's rules once.
"""

from __future__ import annotations

import json
import math
import struct
import unicodedata
from collections.abc import Mapping
from decimal import Decimal
from typing import Any, Final

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


# Control characters, line/paragraph separators and lone surrogates: anything
# that would break a one-line stderr message, move the cursor or not encode.
_ESCAPED_CATEGORIES: Final = frozenset({"Cc", "Zl", "Zp", "Cs"})
_SHORT_ESCAPES: Final = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def one_line(text: str) -> str:
    r"""``text`` made safe for one stderr line: control characters escaped Rust-style.

    A newline, carriage return or tab becomes ``\n``, ``\r``, ``\t``; every
    other control, line-separator or lone-surrogate character becomes
    ``\u{1b}`` (Rust's ``escape_debug`` spelling). Ordinary text, non-ASCII
    included, comes back unchanged. This is the one sanitizer for anything
    user- or server-supplied that ends up in a one-line message.
    """
    # isprintable() is the fast path; it is also False for spaces other than
    # U+0020 (Zs), which stay as they are, hence the category check.
    if text.isprintable() or all(
        unicodedata.category(ch) not in _ESCAPED_CATEGORIES for ch in text
    ):
        return text
    return "".join(_escape(ch) for ch in text)


def _escape(ch: str) -> str:
    if unicodedata.category(ch) not in _ESCAPED_CATEGORIES:
        return ch
    return _SHORT_ESCAPES.get(ch, f"\\u{{{ord(ch):x}}}")


def encodable(text: str) -> str:
    r"""``text`` as UTF-8 can encode it: a lone surrogate becomes its ``\udcff`` spelling.

    Library error texts may carry one (a header decoded with ``surrogateescape``);
    written as-is it would crash the artifact writer.
    """
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text


def truncate_utf8(message: str, limit: int = ERROR_BYTES_LIMIT) -> str:
    """Cut ``message`` at the last UTF-8 boundary within ``limit`` bytes and add ``…``.

    Messages that already fit are returned unchanged (EVALUATE.md §0.3).
    """
    encoded = message.encode("utf-8")
    if len(encoded) <= limit:
        return message
    return encoded[:limit].decode("utf-8", errors="ignore") + ELLIPSIS


def to_f32(value: float) -> float:
    """Round a Python float to the nearest IEEE-754 binary32 value (Rust's ``as f32``).

    Values that round past binary32's largest finite value become infinite,
    as the cast does, where ``struct`` would raise.
    """
    try:
        result: float = struct.unpack("<f", struct.pack("<f", value))[0]
    except OverflowError:
        return math.copysign(math.inf, value)
    return result


class F32(float):
    """A float that is a binary32 value and is spelled as one when serialised.

    Scores and floors are f32 on the wire; spelling them from their binary32
    value gives ``0.86304635`` where the widened double would print
    ``0.8630463480949402`` (EVALUATE.md §6.9, §7.3.3).
    """

    def __new__(cls, value: float) -> F32:
        return super().__new__(cls, to_f32(float(value)))


# serde_json (ryu) switches to exponent form outside these decimal-point positions.
_F32_POSITIONS = (-6, 13)
_F64_POSITIONS = (-5, 16)


def json_f32(value: float) -> str:
    """serde_json's spelling of a binary32: shortest round-trip digits, ``1.0``, ``1e-7``."""
    f32 = to_f32(value)
    if not math.isfinite(f32):
        return "null"
    return _ryu_layout(_shortest_f32_text(f32), *_F32_POSITIONS)


def json_f64(value: float) -> str:
    """serde_json's spelling of an f64 (HTTP.md §8.2): ``1e16``, not Python's ``1e+16``."""
    if not math.isfinite(value):
        return "null"
    return _ryu_layout(repr(float(value)), *_F64_POSITIONS)


def display_f32(value: float) -> str:
    """Rust's ``Display`` of an f32, used in messages: ``1.5``, ``2``, ``0.0000001``."""
    f32 = to_f32(value)
    if not math.isfinite(f32):
        return _display_non_finite(f32)
    return _plain_decimal(_shortest_f32_text(f32))


def display_f64(value: float) -> str:
    """Rust's ``Display`` of an f64, used in messages: ``0.9``, ``3``, ``inf``, ``NaN``."""
    if not math.isfinite(value):
        return _display_non_finite(value)
    return _plain_decimal(repr(float(value)))


def _display_non_finite(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    return "inf" if value > 0 else "-inf"


def _shortest_f32_text(f32: float) -> str:
    """The shortest ``%e`` text that reads back as the same binary32."""
    for precision in range(1, 10):
        candidate = f"{f32:.{precision - 1}e}"
        try:
            if to_f32(float(candidate)) == f32:
                return candidate
        except OverflowError:  # a short rounding above binary32's largest finite value
            continue
    return repr(f32)  # pragma: no cover - 9 significant digits always round-trip


def _plain_decimal(text: str) -> str:
    """Positional decimal without a trailing ``.0`` (``2``, ``-0.5``, ``0.0000001``)."""
    plain = format(Decimal(text), "f")
    if "." in plain:
        plain = plain.rstrip("0").rstrip(".")
    return plain


def _ryu_layout(text: str, min_point: int, max_point: int) -> str:
    """Lay shortest digits out as ryu does: plain decimal inside the window, else ``1.5e-7``."""
    sign = "-" if text.startswith("-") else ""
    mantissa, _, exponent_text = text.lstrip("-").lower().partition("e")
    exponent = int(exponent_text) if exponent_text else 0
    whole, _, fraction = mantissa.partition(".")
    all_digits = whole + fraction
    digits = all_digits.lstrip("0")
    if not digits:
        return f"{sign}0.0"
    # value = 0.<digits> * 10^point once leading zeros are gone.
    point = len(whole) + exponent - (len(all_digits) - len(digits))
    digits = digits.rstrip("0")
    trailing_zeros = point - len(digits)
    if trailing_zeros >= 0 and point <= max_point:
        return f"{sign}{digits}{'0' * trailing_zeros}.0"
    if 0 < point <= max_point:
        return f"{sign}{digits[:point]}.{digits[point:]}"
    if min_point < point <= 0:
        return f"{sign}0.{'0' * -point}{digits}"
    if len(digits) == 1:
        return f"{sign}{digits}e{point - 1}"
    return f"{sign}{digits[0]}.{digits[1:]}e{point - 1}"


def dumps_json(value: object, indent: int | None = None) -> str:
    """JSON text as serde_json writes it: raw UTF-8, ryu float spelling.

    ``indent=None`` is ``to_string`` (compact: the server's bodies, and the
    text taguru's budget accounting measures, HTTP.md §8.2, so it must be
    byte-exact); an ``indent`` is ``to_string_pretty`` (``": "``, empty
    containers as ``{}``/``[]``, no trailing newline: evaluation.json). ``F32``
    values are spelled as binary32, every other float as an f64.
    """
    parts: list[str] = []
    _encode(value, parts, indent, 0)
    return "".join(parts)


def _encode(value: object, out: list[str], indent: int | None, level: int) -> None:
    if value is None:
        out.append("null")
    elif value is True:
        out.append("true")
    elif value is False:
        out.append("false")
    elif isinstance(value, str):
        # serde_json escapes as Python does with ensure_ascii=False (lower-case \u00xx).
        out.append(json.dumps(value, ensure_ascii=False))
    elif isinstance(value, F32):
        out.append(json_f32(value))
    elif isinstance(value, float):
        out.append(json_f64(value))
    elif isinstance(value, int):
        out.append(str(int(value)))
    elif isinstance(value, Mapping):
        _encode_container("{", "}", list(value.items()), out, indent, level)
    elif isinstance(value, list | tuple):
        _encode_container("[", "]", list(value), out, indent, level)
    else:
        raise TypeError(f"cannot encode {type(value).__name__} as JSON")


def _encode_container(
    opening: str, closing: str, items: list[Any], out: list[str], indent: int | None, level: int
) -> None:
    if not items:
        out.append(opening + closing)
        return
    keyed = opening == "{"
    separator = "," if indent is None else ",\n" + " " * (indent * (level + 1))
    out.append(opening if indent is None else opening + "\n" + " " * (indent * (level + 1)))
    for position, item in enumerate(items):
        if position:
            out.append(separator)
        if keyed:
            key, item = item
            if not isinstance(key, str):
                raise TypeError(f"object key {key!r} is not a string")
            out.append(json.dumps(key, ensure_ascii=False))
            out.append(":" if indent is None else ": ")
        _encode(item, out, indent, level + 1)
    out.append(closing if indent is None else "\n" + " " * (indent * level) + closing)

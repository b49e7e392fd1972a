"""Text rules shared by the loaders, the scorer and the reference server.

Rust's notion of whitespace and line ends differs from Python's defaults
(``str.strip`` and ``str.splitlines`` treat U+001C–U+001F and more as
whitespace or line breaks), so these helpers pin the reference's rules once.
"""

from __future__ import annotations

import functools
import math
import struct
import unicodedata
from array import array
from collections.abc import Callable, Iterator, Mapping, Sequence
from decimal import Decimal
from typing import Any, Final, Literal

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

BIDI_CONTROLS: Final = frozenset(
    "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
)
"""The bidirectional controls (format characters, not ``Cc``): raw, they reorder
what a terminal or a CI page shows around them ("Trojan Source")."""

CONTROL_CHARACTERS: Final = (
    r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029"
    r"\u202a-\u202e\u2066-\u2069]"
)
"""What no CI output (JUnit, the Markdown summaries, changes.jsonl) carries raw, as a
regex class both Python's ``re`` and Polars read: C0 but tab, line feed and carriage
return (each output spells those its own way), DEL, C1, the line and paragraph
separators and :data:`BIDI_CONTROLS` — what :func:`one_line` escapes on stderr."""


def one_line(text: str) -> str:
    r"""``text`` made safe for one stderr line: control characters escaped Rust-style.

    A newline, carriage return or tab becomes ``\n``, ``\r``, ``\t``; every
    other control (C0, DEL, C1), line-separator, bidirectional-control or
    lone-surrogate character becomes ``\u{1b}`` (Rust's ``escape_debug``
    spelling). Ordinary text, non-ASCII included, comes back unchanged. This is
    the one sanitizer for anything user- or server-supplied that ends up in a
    one-line message.
    """
    # isprintable() is the fast path (False for every character escaped here); it is
    # also False for spaces other than U+0020 (Zs), which stay, hence the check.
    if text.isprintable() or not any(_escaped(ch) for ch in text):
        return text
    return "".join(_escape(ch) for ch in text)


def _escaped(ch: str) -> bool:
    return ch in BIDI_CONTROLS or unicodedata.category(ch) in _ESCAPED_CATEGORIES


def _escape(ch: str) -> str:
    if not _escaped(ch):
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


def parse_decimal(text: str, maximum: int) -> int | None:
    """``text`` as a plain ASCII decimal (digits only) in ``0..=maximum``, else ``None``.

    Judged on the digits before ``int()``, whose 4,300-digit limit would end a
    longer number in a ``ValueError`` traceback instead of the caller's own
    message; leading zeros do not count against the length.
    """
    if not (text.isascii() and text.isdigit()):
        return None
    digits = text.lstrip("0") or "0"
    if len(digits) > len(str(maximum)):
        return None
    value = int(digits)
    return value if value <= maximum else None


def truncate_utf8(message: str, limit: int = ERROR_BYTES_LIMIT) -> str:
    """Cut ``message`` at the last UTF-8 boundary within ``limit`` bytes and add ``…``.

    Messages that already fit are returned unchanged (EVALUATE.md §0.3).
    """
    encoded = message.encode("utf-8")
    if len(encoded) <= limit:
        return message
    return encoded[:limit].decode("utf-8", errors="ignore") + ELLIPSIS


_BINARY32 = struct.Struct("<f")
_pack_f32 = _BINARY32.pack
_unpack_f32 = _BINARY32.unpack


def to_f32(value: float) -> float:
    """Round a Python float to the nearest IEEE-754 binary32 value (Rust's ``as f32``).

    Values that round past binary32's largest finite value become infinite,
    as the cast does, where ``struct`` would raise.
    """
    try:
        result: float = _unpack_f32(_pack_f32(value))[0]
    except OverflowError:
        return math.copysign(math.inf, value)
    return result


def to_f32_all(values: Sequence[float]) -> list[float]:
    """``[to_f32(v) for v in values]`` in one C-level pass (a search page's scores):
    ``array('f')`` casts each double to binary32 with the same rounding, and to
    infinity past its range, as the cast does."""
    return array("f", values).tolist()


class F32(float):
    """A float that is a binary32 value and is spelled as one when serialised.

    Scores and floors are f32 on the wire; spelling them from their binary32
    value gives ``0.86304635`` where the widened double would print
    ``0.8630463480949402`` (EVALUATE.md §6.9, §7.3.3).
    """

    def __new__(cls, value: float) -> F32:
        # float.__new__ directly: a large artifact makes over a million of these
        return float.__new__(cls, to_f32(float(value)))


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


def dumps_json(value: object, indent: Literal[2] | None = None) -> str:
    """JSON text as serde_json writes it: raw UTF-8, ryu float spelling.

    ``indent=None`` is ``to_string`` (compact: the server's bodies, and the
    text taguru's budget accounting measures, HTTP.md §8.2, so it must be
    byte-exact); ``indent=2`` is ``to_string_pretty`` (``": "``, empty
    containers as ``{}``/``[]``, no trailing newline: evaluation.json). ``F32``
    values are spelled as binary32, every other float as an f64.

    A lone surrogate (say from an undecodable path argument) cannot be UTF-8;
    it is kept as is in the text, so whoever encodes the text reports it.
    """
    try:
        return _encode(value, indent).decode("utf-8")
    except UnicodeEncodeError:
        return _dumps_with_surrogates(value, indent)


def encode_json(value: object, indent: Literal[2] | None = None) -> bytes:
    """``dumps_json(value, indent).encode("utf-8")``, errors included, without the text.

    A lone surrogate raises the ``UnicodeEncodeError`` that encoding the text
    raises (its position counted in the whole text); a value JSON cannot hold
    raises ``TypeError``.
    """
    try:
        return _encode(value, indent)
    except UnicodeEncodeError:
        return _dumps_with_surrogates(value, indent).encode("utf-8")


def encode_json_each(
    values: Sequence[object],
    indent: Literal[2] | None = None,
    binary32: Sequence[Sequence[float] | None] | None = None,
) -> list[bytes]:
    """``[encode_json(value, indent) for value in values]`` with one binary32
    spelling pass for all of them (that pass costs a Polars call: per value, it
    would cost more than the encoding).

    ``binary32`` (one entry per value) lets a value hold :func:`binary32_slot`
    placeholders instead of :class:`F32` objects: its entry lists their values
    in the order they are written, and they are spelled as F32 values would be
    (rounded to binary32 first). A value holds one kind or the other, never both.
    """
    import msgspec  # on first use, as in _encode

    found: list[float] = []
    slot = binary32_slot()

    def hook(item: object) -> object:
        if type(item) is F32:
            found.append(item)
            return slot
        return _json_ready(item, msgspec.Raw)

    encoder = msgspec.json.Encoder(enc_hook=hook)
    encoded: list[bytes] = []
    slots: list[int] = []
    for position, value in enumerate(values):
        before = len(found)
        held = None if binary32 is None else binary32[position]
        try:
            encoded.append(encoder.encode(value))
        except UnicodeEncodeError:
            del found[before:]
            if held:  # the stdlib's writer spells F32 objects, not placeholders
                value, held = _with_f32(value, iter(held), slot), None
            encoded.append(_dumps_with_surrogates(value, None).encode("utf-8"))
        if held:
            if len(found) > before:
                raise ValueError("a value holds both F32 objects and binary32 slots")
            found.extend(held)
        slots.append(len(found) - before)
    if found:
        spelled = spell_f32_values(found)
        taken = 0
        for position, count in enumerate(slots):
            if count:
                encoded[position] = _fill_slots(encoded[position], spelled[taken : taken + count])
                taken += count
    if indent is None:
        return encoded
    return [msgspec.json.format(data, indent=indent) for data in encoded]


def _encode(value: object, indent: Literal[2] | None) -> bytes:
    """The JSON bytes at C speed.

    msgspec writes the structure (key order as built, strings escaped as
    serde_json escapes them, f64 values in ryu's spelling); every ``F32`` is
    left as a one-byte slot and all of them are spelled afterwards in one
    vectorized pass; ``msgspec.json.format`` gives the pretty layout.
    """
    # Imported on first use: errors.py needs this module's one_line, and
    # --version, --help and usage errors write no JSON.
    import msgspec

    binary32: list[float] = []
    slot = msgspec.Raw(_SLOT_BYTE)

    def hook(item: object) -> object:
        if type(item) is F32:
            binary32.append(item)
            return slot
        return _json_ready(item, msgspec.Raw)

    data = msgspec.json.Encoder(enc_hook=hook).encode(value)
    if binary32:
        data = _fill_slots(data, spell_f32_values(binary32))
    return data if indent is None else msgspec.json.format(data, indent=indent)


# A raw NUL never appears in msgspec's output (strings escape it as \u0000),
# so each one marks where an F32 goes.
_SLOT_BYTE = b"\x00"  # a byte msgspec escapes everywhere else


@functools.cache
def binary32_slot() -> Any:
    """The placeholder (``msgspec.Raw``) a binary32 value holds in a value given to
    :func:`encode_json_each` with its ``binary32`` values: one object, compared by
    identity."""
    import msgspec  # on first use, as in _encode

    return msgspec.Raw(_SLOT_BYTE)


def spell_f32_values(values: Sequence[float]) -> list[bytes]:
    """:func:`json_f32` of every value at once (Polars' shortest binary32 digits).

    Polars prints a Float32 with the same shortest round-trip digits and the
    same plain/exponent windows as serde_json, only with ``e+`` for a
    positive exponent; non-finite values are ``null``.
    """
    # Imported on first use: errors.py needs this module's one_line, and every
    # command's --help and usage errors must not pay for Polars.
    import polars as pl

    column = pl.Series(values, dtype=pl.Float32)
    spelled = pl.select(
        pl.when(column.is_finite())
        .then(column.cast(pl.String).str.replace("e+", "e", literal=True))
        .otherwise(pl.lit("null"))
        .cast(pl.Binary)
    ).to_series()
    return spelled.to_list()


def _with_f32(value: object, held: Iterator[float], slot: object) -> object:
    """``value`` with each binary32 placeholder replaced by an :class:`F32` of the
    next held value (dicts and lists rebuilt in order, as they are written)."""
    if value is slot:
        return F32(next(held))
    if isinstance(value, dict):
        return {key: _with_f32(item, held, slot) for key, item in value.items()}
    if isinstance(value, list):
        return [_with_f32(item, held, slot) for item in value]
    return value


def _fill_slots(data: bytes, spelled: list[bytes]) -> bytes:
    pieces = data.split(_SLOT_BYTE)
    if len(pieces) != len(spelled) + 1:  # pragma: no cover - msgspec escapes every NUL
        raise ValueError("binary32 slots and values disagree")
    joined: list[bytes] = [b""] * (2 * len(spelled) + 1)
    joined[0::2] = pieces
    joined[1::2] = spelled
    return b"".join(joined)


def _json_ready(value: object, raw: Callable[[bytes], object]) -> object:
    """What msgspec cannot write itself, as the old recursive writer wrote it
    (``raw`` is ``msgspec.Raw``: bytes written as they are)."""
    if isinstance(value, float):
        return raw(json_f64(value).encode("ascii"))
    if isinstance(value, str):
        return str.__str__(value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, Mapping):
        return dict(value.items())
    raise TypeError(f"cannot encode {type(value).__name__} as JSON")


def _dumps_with_surrogates(value: object, indent: Literal[2] | None) -> str:
    """The text of a document holding lone surrogates, each written raw.

    Every surrogate is swapped for a stand-in from a block of private-use code
    points the document does not use, the document encoded, and the stand-ins
    swapped back: JSON escaping leaves both kinds of code point alone.
    """
    texts: list[str] = []
    _collect_strings(value, texts)
    used = set("".join(texts))
    for base in range(0xF0000, 0x10F800, _SURROGATE_COUNT):
        if not any(chr(code) in used for code in range(base, base + _SURROGATE_COUNT)):
            break
    else:  # pragma: no cover - a document would need every private-use code point
        raise ValueError("no free private-use block for the lone surrogates")
    there = {0xD800 + offset: base + offset for offset in range(_SURROGATE_COUNT)}
    back = {stand_in: surrogate for surrogate, stand_in in there.items()}
    stood_in = _map_strings(value, lambda text: text.translate(there))
    return _encode(stood_in, indent).decode("utf-8").translate(back)


_SURROGATE_COUNT = 0xE000 - 0xD800


def _collect_strings(value: object, out: list[str]) -> None:
    if isinstance(value, str):
        out.append(value)
    elif isinstance(value, Mapping):
        for key, item in value.items():
            _collect_strings(key, out)
            _collect_strings(item, out)
    elif isinstance(value, list | tuple):
        for item in value:
            _collect_strings(item, out)


def _map_strings(value: object, change: Callable[[str], str]) -> object:
    if isinstance(value, str):
        return change(value)
    if isinstance(value, Mapping):
        return {
            change(key) if isinstance(key, str) else key: _map_strings(item, change)
            for key, item in value.items()
        }
    if isinstance(value, list | tuple):
        return [_map_strings(item, change) for item in value]
    return value

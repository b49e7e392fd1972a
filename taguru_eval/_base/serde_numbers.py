"""How taguru reads a JSON number: serde_json's default parser (ERRATA row 24).

taguru is built without serde_json's ``float_roundtrip`` feature, so a number
is not read as the double nearest its decimal value. The parser keeps the
decimal digits as an unsigned 64-bit *significand* and a power of ten, then:

1. The digits (integer part, then fraction) accumulate while the significand
   stays within ``u64``. Leading zeros always fit. Once a digit would overflow,
   the remaining fraction digits are dropped; the remaining integer digits are
   dropped too but each scales the value by ten — and after such an integer
   overflow the fraction is tried once more, so one more digit may still fit
   (``18446744073709551616.5`` keeps the ``5``).
2. The exponent (``e``/``E``, optional sign) is an ``i32``: written digits that
   overflow it give ``±0.0`` for a negative exponent or a zero significand, and
   "number out of range" otherwise; the sum with the digits' own scale
   saturates.
3. The value is ``significand as f64`` (rounding once), then one multiplication
   or division by the correctly rounded ``1e{k}`` for ``k`` up to 308 (rounding
   again); below ``1e-308`` it is first divided by ``1e308``. A product that
   overflows is "number out of range". The sign is applied last, so ``-0`` is
   ``-0.0``.

Two roundings: ``0.9134015924715543`` reads as ``0.9134015924715544``. A number
with at most 15 significant digits and a small exponent reads exactly as the
nearest double, because both operands are then exact.

This module is the one place the rule lives, in two forms of the same steps:
:func:`read_number` for one token and :func:`read_numbers` for a column of
tokens. :func:`read_back` is what taguru reads from the JSON a double was
written as (its shortest spelling, serde's and msgspec's alike): a value this
package computed and stored compares as its evaluation.json would.
``tests/_base/test_serde_numbers.py`` holds both forms to an independent
character-by-character port of serde's parser (``tests/support/serde_number_oracle.py``)
and to numbers recorded from the real taguru.
"""

from __future__ import annotations

import math
from typing import Final

import polars as pl

from taguru_eval._base.text import to_f32

U64_MAX: Final = 2**64 - 1
_U64_MAX_TEXT: Final = str(U64_MAX)
_U64_DIGITS: Final = len(_U64_MAX_TEXT)
I32_MAX: Final = 2**31 - 1
I32_MIN: Final = -(2**31)
_LARGEST_POWER: Final = 308

POW10: Final = tuple(float(f"1e{k}") for k in range(_LARGEST_POWER + 1))
"""serde_json's table: ``1e0`` … ``1e308``, each the double nearest its value."""

_EXACT_TOKEN_LENGTH: Final = 16
"""A token this short without an exponent has at most 15 digits (or is an integer
within u64): its significand and power of ten are exact doubles, so the one
rounding left is the correct one."""


class NumberOutOfRange(ValueError):
    """serde's ``number out of range``: the value overflows a double."""

    def __init__(self, token: str) -> None:
        super().__init__(f"number out of range: {token[:40]}")


# --------------------------------------------------------------------------- one token


def read_number(token: str) -> float:
    """The double taguru reads from ``token``, one JSON number as written.

    Raises :class:`NumberOutOfRange` where taguru refuses the number.
    """
    if len(token) <= _EXACT_TOKEN_LENGTH and "e" not in token and "E" not in token:
        return float(token)
    negative = token.startswith("-")
    mantissa, _, exponent_text = token.removeprefix("-").replace("E", "e").partition("e")
    integer, _, fraction = mantissa.partition(".")
    significand, scale = _significand(integer, fraction)
    if exponent_text:
        exponent = _exponent(exponent_text)
        if exponent is None:  # the written exponent overflows an i32
            if significand and not exponent_text.startswith("-"):
                raise NumberOutOfRange(token)
            return -0.0 if negative else 0.0
        scale = min(max(scale + exponent, I32_MIN), I32_MAX)
    value = _from_parts(significand, scale)
    if value is None:
        raise NumberOutOfRange(token)
    return -value if negative else value


def _significand(integer: str, fraction: str) -> tuple[int, int]:
    """Step 1: the significand serde keeps and the power of ten it carries."""
    digits = integer + fraction
    stripped = digits.lstrip("0")
    kept = _kept_digits(stripped)
    significand = int(stripped[:kept] or "0")
    accepted = len(digits) - len(stripped) + kept
    if accepted >= len(integer):
        return significand, len(integer) - accepted
    scale = len(integer) - accepted
    if fraction and significand * 10 + int(fraction[0]) <= U64_MAX:
        return significand * 10 + int(fraction[0]), scale - 1
    return significand, scale


def _kept_digits(stripped: str) -> int:
    """How many leading digits (no leading zero) fit a u64."""
    if len(stripped) < _U64_DIGITS:
        return len(stripped)
    return _U64_DIGITS if stripped[:_U64_DIGITS] <= _U64_MAX_TEXT else _U64_DIGITS - 1


def _exponent(text: str) -> int | None:
    """Step 2: the written exponent, or None when it overflows an i32."""
    digits = text.lstrip("+-").lstrip("0")
    if len(digits) > len(str(I32_MAX)) or int(digits or "0") > I32_MAX:
        return None
    return -int(digits or "0") if text.startswith("-") else int(digits or "0")


def _from_parts(significand: int, scale: int) -> float | None:
    """Step 3: ``significand`` times ten to ``scale``, or None when out of range."""
    value = float(significand)
    if scale > _LARGEST_POWER:
        return 0.0 if value == 0.0 else None
    if scale >= 0:
        value *= POW10[scale]
        return None if value == float("inf") else value
    if scale < -_LARGEST_POWER:
        value /= POW10[_LARGEST_POWER]
        scale += _LARGEST_POWER
        if scale < -_LARGEST_POWER:  # a second 1e308 takes any u64 below the subnormals
            return 0.0
    return value / POW10[-scale]


_DOUBT_ULPS: Final = 4
"""How far (in units in the last place) taguru's reading may stray from the
nearest double: two roundings of at most half a unit each, with room to spare."""


def binary32_settled(nearest: float) -> bool:
    """Whether a number whose nearest double is ``nearest`` becomes the same
    binary32 however it is read: every double within a few units of it rounds
    to one binary32. A reader that only has the nearest double (msgspec's) can
    keep it then; otherwise only the number as written decides."""
    margin = _DOUBT_ULPS * math.ulp(nearest)
    return to_f32(nearest - margin) == to_f32(nearest + margin)


# --------------------------------------------------------------------------- a column


def read_numbers(tokens: pl.Series) -> pl.Series:
    """:func:`read_number` over a column of tokens (String): ``"null"`` and null
    read as null; a number taguru refuses reads as ``±inf`` (which no accepted
    number reads as), for the caller to refuse.

    The tokens must be JSON numbers (or ``null``); only those a single rounding
    cannot read take the steps, in a handful of whole-column expressions.
    """
    name = tokens.name
    frame = pl.DataFrame({"token": tokens.cast(pl.String)})
    direct = frame.get_column("token").cast(pl.Float64, strict=False)
    token = pl.col("token")
    slow = frame.with_row_index("row").filter(
        (token.str.len_bytes() > _EXACT_TOKEN_LENGTH)
        | token.str.contains("e", literal=True)
        | token.str.contains("E", literal=True)
    )
    if slow.height:
        direct = direct.scatter(slow.get_column("row"), _stepwise(slow).get_column("value"))
    return direct.alias(name)


def _stepwise(frame: pl.DataFrame) -> pl.DataFrame:
    """Steps 1–3 over ``frame``'s ``token`` column, as :func:`read_number` takes them."""
    body, at = pl.col("body"), pl.col("exponent_at")
    mantissa, digits, stripped = pl.col("mantissa"), pl.col("digits"), pl.col("stripped")
    parts = (
        frame.lazy()
        .select(
            pl.col("token").str.starts_with("-").alias("negative"),
            pl.col("token").str.strip_prefix("-").str.replace("E", "e", literal=True).alias("body"),
        )
        .with_columns(body.str.find("e", literal=True).alias("exponent_at"))
        .with_columns(
            body.str.slice(0, pl.coalesce(at, body.str.len_bytes())).alias("mantissa"),
            body.str.slice(at + 1).alias("exponent_text"),
        )
        .with_columns(
            pl.coalesce(mantissa.str.find(".", literal=True), mantissa.str.len_bytes())
            .cast(pl.Int64)
            .alias("integer_length"),
            mantissa.str.replace(".", "", literal=True).alias("digits"),
        )
        .with_columns(stripped=digits.str.strip_chars_start("0"))
        .with_columns(
            pl.when(stripped.str.len_bytes() < _U64_DIGITS)
            .then(stripped.str.len_bytes())
            .when(stripped.str.slice(0, _U64_DIGITS) <= _U64_MAX_TEXT)
            .then(_U64_DIGITS)
            .otherwise(_U64_DIGITS - 1)
            .cast(pl.Int64)
            .alias("kept")
        )
        .with_columns(
            stripped.str.slice(0, pl.col("kept"))
            .cast(pl.UInt64, strict=False)
            .fill_null(0)
            .alias("significand"),
            (
                digits.str.len_bytes().cast(pl.Int64)
                - stripped.str.len_bytes().cast(pl.Int64)
                + pl.col("kept")
            ).alias("accepted"),
        )
        .collect()
    )
    integer_length = pl.col("integer_length")
    scale = integer_length - pl.col("accepted")
    if (parts.get_column("accepted") < parts.get_column("integer_length")).any():
        # After an integer-part overflow serde tries the fraction once more: its
        # first digit still fits when the significand is 1844674407370955161.
        first_fraction = digits.str.slice(integer_length, 1).cast(pl.UInt64, strict=False)
        tenth, last = divmod(U64_MAX, 10)
        significand = pl.col("significand")
        retried = (
            (pl.col("accepted") < integer_length)
            & (significand == pl.lit(tenth, dtype=pl.UInt64))
            & (first_fraction <= last)
        ).fill_null(False)
        parts = parts.with_columns(
            pl.when(retried)
            .then(significand * pl.lit(10, dtype=pl.UInt64) + first_fraction)
            .otherwise(significand)
            .alias("significand"),
            (scale - retried.cast(pl.Int64)).alias("scale"),
        )
    else:
        parts = parts.with_columns(scale.alias("scale"))
    exponent_digits = pl.col("exponent_text").str.strip_chars_start("+-").str.strip_chars_start("0")
    written = exponent_digits.cast(pl.Int64, strict=False).fill_null(0)
    overflow = (exponent_digits.str.len_bytes() > len(str(I32_MAX))) | (written > I32_MAX)
    exponent_negative = pl.col("exponent_text").str.starts_with("-").fill_null(False)
    parts = parts.with_columns(
        overflow.fill_null(False).alias("exponent_overflow"),
        (pl.col("scale") + pl.when(exponent_negative).then(-written).otherwise(written))
        .clip(I32_MIN, I32_MAX)
        .alias("scale"),
    )
    # Every operand is a whole column: Polars divides by a scalar as a
    # multiplication by its reciprocal, which is not IEEE division.
    powers = pl.lit(pl.Series(POW10, dtype=pl.Float64))
    value = pl.col("significand").cast(pl.Float64)
    scale = pl.col("scale")
    below = scale < -_LARGEST_POWER
    first = pl.when(below).then(_LARGEST_POWER).otherwise(-scale).clip(0, _LARGEST_POWER)
    second = pl.when(below).then(-scale - _LARGEST_POWER).otherwise(0)
    divided = value / powers.gather(first) / powers.gather(second.clip(0, _LARGEST_POWER))
    magnitude = (
        pl.when(pl.col("exponent_overflow"))
        .then(pl.when(exponent_negative | (value == 0.0)).then(0.0).otherwise(float("inf")))
        .when(scale > _LARGEST_POWER)
        .then(pl.when(value == 0.0).then(0.0).otherwise(float("inf")))
        .when(scale >= 0)
        .then(value * powers.gather(scale.clip(0, _LARGEST_POWER)))
        .when(second > _LARGEST_POWER)
        .then(0.0)
        .otherwise(divided)
    )
    return parts.select(
        pl.when(pl.col("negative")).then(-magnitude).otherwise(magnitude).alias("value")
    )


_SHORT_STEP: Final = 2.0**-10
_SHORT_BOUND: Final = 2.0**16
"""A multiple of 2**-10 below 2**16 has at most 15 significant digits (10 after the
point, 5 before it), so its shortest spelling reads back exactly: 0, 0.5, 0.25, 3."""


def read_back(values: pl.Series) -> pl.Series:
    """What taguru reads from the JSON ``values`` are written as: each finite
    double through its shortest spelling (the digits serde_json and msgspec both
    write); null and non-finite values stay as they are, and so does a value whose
    spelling is short enough to be read with one rounding."""
    frame = pl.DataFrame({"value": values.cast(pl.Float64)}).with_row_index("row")
    value = pl.col("value")
    scaled = value / _SHORT_STEP
    spelled = frame.filter(
        value.is_finite() & ~((scaled == scaled.round()) & (value.abs() < _SHORT_BOUND))
    ).select("row", value.cast(pl.String).alias("token"))
    read = frame.get_column("value")
    if spelled.height:
        read = read.scatter(spelled.get_column("row"), read_numbers(spelled.get_column("token")))
    return read.alias(values.name)

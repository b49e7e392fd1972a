"""How taguru reads a JSON number (ERRATA row 24), held to an independent port.

``tests/support/serde_number_oracle.py`` follows serde_json's parser a
character at a time; ``taguru_eval._base.serde_numbers`` takes the same steps a
token (``read_number``) or a column (``read_numbers``) at a time. Both are
compared bit for bit (the sign of zero included) over generated tokens that
reach every branch: significands past u64, integer parts that overflow with a
fraction after them, exponents with leading zeros, past i32 and past 308, and
the subnormal range. ``tests/data/serde_numbers_097.json`` holds numbers the
real taguru 0.9.7 read (recorded through its ``evaluate compare``;
``tests/differential/test_numbers_097.py`` records them again on every run
that has the binary).
"""

from __future__ import annotations

import json
import math
import struct

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support import serde_number_oracle as oracle
from support.paths import TEST_DATA

from taguru_eval._base.serde_numbers import (
    POW10,
    NumberOutOfRange,
    binary32_settled,
    read_back,
    read_number,
    read_numbers,
)
from taguru_eval._base.text import to_f32

RECORDED = TEST_DATA / "serde_numbers_097.json"


def _bits(value: float) -> bytes:
    return struct.pack("<d", value)


def _oracle(token: str) -> float | None:
    """The oracle's reading, None where serde refuses the number."""
    try:
        return oracle.parse(token)
    except oracle.OutOfRange:
        return None


def _ours(token: str) -> float | None:
    try:
        return read_number(token)
    except NumberOutOfRange:
        return None


def _same(have: float | None, want: float | None) -> bool:
    if have is None or want is None:
        return have is want
    return _bits(have) == _bits(want)


_DIGIT = st.sampled_from("0123456789")
_U64_EDGE = st.sampled_from(["1844674407370955161", "184467440737095516", "9999999999999999999"])


@st.composite
def number_tokens(draw: st.DrawFn) -> str:
    """A JSON number as any writer might spell it."""
    sign = draw(st.sampled_from(["", "-"]))
    head = draw(
        st.one_of(
            st.just("0"),
            st.builds(lambda first, rest: first + rest, st.sampled_from("123456789"),
                      st.text(_DIGIT, max_size=30)),
            st.builds(lambda edge, rest: edge + rest, _U64_EDGE, st.text(_DIGIT, max_size=4)),
        )
    )  # fmt: skip
    fraction = draw(st.one_of(st.just(""), st.text(_DIGIT, min_size=1, max_size=45)))
    exponent = draw(
        st.one_of(
            st.just(""),
            st.builds(
                lambda e, sign, zeros, digits: f"{e}{sign}{zeros}{digits}",
                st.sampled_from("eE"),
                st.sampled_from(["", "+", "-"]),
                st.sampled_from(["", "0", "000"]),
                st.one_of(
                    st.integers(0, 30),
                    st.integers(280, 700),
                    st.integers(2**31 - 400, 2**31 + 400),
                    st.integers(0, 10**14),
                ).map(str),
            ),
        )
    )
    return sign + head + ("." + fraction if fraction else "") + exponent


@settings(max_examples=3000, deadline=None)
@given(number_tokens())
def test_one_token_reads_as_serde_reads_it(token: str) -> None:
    assert _same(_ours(token), _oracle(token)), token


@settings(max_examples=40, deadline=None)
@given(st.lists(number_tokens(), min_size=1, max_size=400))
def test_a_column_reads_as_each_token_does(tokens: list[str]) -> None:
    read = read_numbers(pl.Series(tokens, dtype=pl.String)).to_list()
    for token, have in zip(tokens, read, strict=True):
        want = _oracle(token)
        if want is None:
            assert have in (math.inf, -math.inf), token
        else:
            assert have is not None and _bits(have) == _bits(want), token


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(allow_nan=False, allow_infinity=False), max_size=300))
def test_a_stored_double_reads_as_its_written_spelling_does(values: list[float]) -> None:
    """``repr`` spells a double with the shortest digits, as serde_json and msgspec do."""
    read = read_back(pl.Series(values, dtype=pl.Float64)).to_list()
    for value, have in zip(values, read, strict=True):
        assert _same(have, _oracle(repr(value))), value


@pytest.mark.parametrize(
    ("token", "reads_as"),
    [
        ("0.9134015924715543", 0.9134015924715544),  # ERRATA row 24's example
        ("0.5", 0.5),
        ("3", 3.0),
        ("-0", -0.0),
        ("-0.0", -0.0),
        ("0e999999999999", 0.0),
        ("-1e-99999999999", -0.0),
        ("4.9e-324", 5e-324),
        # The integer part overflows a u64 at its last digit; the fraction's first
        # digit still fits, and only it.
        ("18446744073709551616.5", 1.8446744073709552e19),
        ("1e-400", 0.0),
    ],
)
def test_known_readings(token: str, reads_as: float) -> None:
    for reading in (read_number(token), read_numbers(pl.Series([token])).item()):
        assert _bits(reading) == _bits(reads_as)
        assert _same(reading, _oracle(token))


@pytest.mark.parametrize("token", ["1e400", "1.7976931348623159e308", "1e2147483648", "17e308"])
def test_out_of_range_is_refused(token: str) -> None:
    with pytest.raises(NumberOutOfRange, match=r"^number out of range: "):
        read_number(token)
    assert read_numbers(pl.Series([token, "-" + token])).to_list() == [math.inf, -math.inf]
    assert _oracle(token) is None


def test_null_reads_as_null() -> None:
    assert read_numbers(pl.Series(["null", None, "1.5"])).to_list() == [None, None, 1.5]
    assert read_back(pl.Series([None, math.nan, math.inf], dtype=pl.Float64)).to_list()[:1] == [
        None
    ]


def test_the_power_table_is_the_correctly_rounded_one() -> None:
    assert tuple(oracle.POW10) == POW10


def test_a_double_near_a_binary32_midpoint_is_not_settled() -> None:
    # 1 + 2**-24 lies halfway between two binary32 values: how the digits are
    # read decides which one a floor becomes.
    assert not binary32_settled(1.0000000596046448)
    assert binary32_settled(0.4)
    assert to_f32(read_number("1.0000000596046449")) == 1.0
    assert to_f32(float("1.0000000596046449")) > 1.0


def test_recorded_from_taguru() -> None:
    """Every number taguru 0.9.7 was seen reading reads the same here."""
    recorded = json.loads(RECORDED.read_text(encoding="utf-8"))
    assert len(recorded["readings"]) >= 200
    tokens = [token for token, _ in recorded["readings"]]
    column = read_numbers(pl.Series(tokens, dtype=pl.String)).to_list()
    for (token, taguru), from_column in zip(recorded["readings"], column, strict=True):
        assert _bits(read_number(token)) == _bits(taguru), token
        assert _bits(from_column) == _bits(taguru), token
    differing = sum(float(token) != taguru for token, taguru in recorded["readings"])
    assert differing >= 50  # the file is no set of easy numbers


@settings(max_examples=2000, deadline=None)
@given(st.integers(-(2**26) + 1, 2**26 - 1))
def test_a_short_stored_double_needs_no_spelling(units: int) -> None:
    """``read_back`` keeps a multiple of 2**-10 below 2**16 as it is: its shortest
    spelling always reads back as itself."""
    value = units / 1024
    assert _same(_oracle(repr(value)), value)
    assert _same(read_back(pl.Series([value])).item(), value)

"""The JSON writer (taguru_eval._base.text): byte for byte the recursive writer it replaced.

The oracle is the old pure-Python writer (``serde_json_oracle.dumps_json``);
every document hypothesis draws is written by both, compact and pretty, and
the bytes must be equal. The conftest fixture ``_writers_match_the_oracle``
does the same for every document the rest of the suite writes.
"""

from __future__ import annotations

import math
import struct
import types
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support import serde_json_oracle as oracle

from taguru_eval._base.text import (
    F32,
    dumps_json,
    encode_json,
    json_f32,
    spell_f32_values,
    to_f32,
    to_f32_all,
)

EDGE_FLOATS = [
    0.0, -0.0, 5e-324, -5e-324, 2.2250738585072014e-308, 2.225073858507201e-308,
    1e16, 1e15, 9999999999999998.0, 1.0000000000000002e16, 1e-5, 1e-6, 0.00001234,
    1.7976931348623157e308, 0.1, 1.0, 123456789.0, math.inf, -math.inf, math.nan,
    1e-7, 1e-45, 1.17549435e-38, 3.4028235e38, 3.5e38, 1e13, 1e12, 16777217.0,
]  # fmt: skip
HUGE_INTS = [2**63, 2**64, -(2**63) - 1, 10**400, -(10**30), 0, -1]

keys = st.text(alphabet=st.characters(codec="utf-8"), max_size=8)
strings = st.one_of(
    st.text(alphabet=st.characters(codec="utf-8"), max_size=12),
    st.sampled_from(["", "\x00", "\x1f\x7f", '"\\/', "\u2028\u2029", "é青嶺", "\U0001f376"]),
)
floats = st.one_of(st.floats(), st.sampled_from(EDGE_FLOATS))
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.sampled_from(HUGE_INTS),
    floats,
    floats.map(F32),
    strings,
)
documents = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.lists(inner, max_size=3).map(tuple),
        st.dictionaries(keys, inner, max_size=4),
    ),
    max_leaves=30,
)


@st.composite
def artifacts(draw: st.DrawFn) -> dict[str, Any]:
    """evaluation.json-shaped documents: cases with F32-scored hits, ratios, nulls."""

    def hit(rank: int) -> dict[str, Any]:
        return {
            "source": draw(strings),
            "paragraph": draw(st.integers(0, 2**32)),
            "score": F32(draw(floats)),
            "lanes": {"bm25": {"rank": rank, "score": F32(draw(floats))}},
        }

    cases = [
        {
            "case_id": draw(strings),
            "query": draw(strings),
            "limit": draw(st.integers(1, 1000)),
            "passage": {
                "outcome": "searched",
                "plan": {"lanes": {"vector": {"ran": False, "floor": F32(draw(floats))}}},
                "hits": [hit(rank) for rank in range(1, draw(st.integers(0, 4)) + 1)],
                "latency_ms": draw(st.integers(0, 10**6)),
            },
            "recall": {"recall_at_k": draw(floats), "mrr": draw(floats), "ndcg": None},
            "missed": draw(st.lists(strings, max_size=2)),
            "missed_truncated": 0,
        }
        for _ in range(draw(st.integers(0, 3)))
    ]
    return {
        "taguru_evaluation": 1,
        "inputs": {"eval": {"path": draw(strings), "name": None}, "concurrency": 8},
        "thresholds": None,
        "cases": cases,
        "metrics": draw(st.dictionaries(keys, st.dictionaries(keys, scalars, max_size=3))),
    }


def assert_same_as_oracle(doc: object) -> None:
    for indent in (None, 2):
        text = oracle.dumps_json(doc, indent)
        assert dumps_json(doc, indent) == text
        assert encode_json(doc, indent) == text.encode("utf-8")


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(doc=documents)
def test_any_document_is_written_as_the_oracle_writes_it(doc: object) -> None:
    assert_same_as_oracle(doc)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(doc=artifacts())
def test_artifact_shaped_documents_are_written_as_the_oracle_writes_them(doc: object) -> None:
    assert_same_as_oracle(doc)


@settings(max_examples=300, deadline=None)
@given(bits=st.lists(st.integers(0, 2**32 - 1), min_size=1, max_size=200))
def test_binary32_spelling_is_json_f32_for_any_bit_pattern(bits: list[int]) -> None:
    values = [struct.unpack("<f", struct.pack("<I", pattern))[0] for pattern in bits]
    assert [text.decode() for text in spell_f32_values(values)] == [json_f32(v) for v in values]


@settings(max_examples=200, deadline=None)
@given(bits=st.lists(st.integers(0, 2**64 - 1), min_size=1, max_size=100))
def test_f64_spelling_is_json_f64_for_any_bit_pattern(bits: list[int]) -> None:
    values = [struct.unpack("<d", struct.pack("<Q", pattern))[0] for pattern in bits]
    assert_same_as_oracle(values)


surrogate_texts = st.lists(
    st.one_of(
        st.characters(categories=["Cs"]),
        st.characters(min_codepoint=0xF0000, max_codepoint=0xF0800),  # the first stand-in block
        st.characters(codec="utf-8"),
    ),
    min_size=1,
    max_size=6,
).map("".join)


@settings(max_examples=200, deadline=None)
@given(
    doc=st.recursive(
        st.one_of(surrogate_texts, floats.map(F32), st.integers()),
        lambda inner: st.one_of(
            st.lists(inner, max_size=3), st.dictionaries(surrogate_texts, inner, max_size=3)
        ),
        max_leaves=8,
    )
)
def test_lone_surrogates_behave_as_before(doc: object) -> None:
    """Text keeps them raw; bytes fail with the error encoding that text raises."""
    for indent in (None, 2):
        text = oracle.dumps_json(doc, indent)
        assert dumps_json(doc, indent) == text
        try:
            expected: bytes | str = text.encode("utf-8")
        except UnicodeEncodeError as error:
            expected = str(error)
        try:
            got: bytes | str = encode_json(doc, indent)
        except UnicodeEncodeError as error:
            got = str(error)
        assert got == expected


def test_what_msgspec_does_not_write_itself_is_written_as_before() -> None:
    class Text(str):
        pass

    class Number(int):
        pass

    class Wide(float):
        pass

    doc = {
        "proxy": types.MappingProxyType({"b": 1, "a": [Text("x"), Number(7), Wide(1e16)]}),
        Text("key"): F32(0.1),
    }
    assert_same_as_oracle(doc)


@pytest.mark.parametrize("value", [object(), {"a": [1, object()]}])
def test_a_value_json_cannot_hold_fails_with_the_same_message(value: object) -> None:
    with pytest.raises(TypeError) as old:
        oracle.dumps_json(value)
    with pytest.raises(TypeError) as new:
        encode_json(value)
    assert str(new.value) == str(old.value) == "cannot encode object as JSON"


def test_no_binary32_slot_survives_a_nul_in_a_string() -> None:
    doc = {"\x00": ["\x00", F32(0.5), "a\x00b", F32(1e-7)]}
    assert encode_json(doc) == b'{"\\u0000":["\\u0000",0.5,"a\\u0000b",1e-7]}'
    assert_same_as_oracle(doc)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.floats(allow_nan=False) | st.sampled_from([v for v in EDGE_FLOATS if not math.isnan(v)]),
        max_size=40,
    )
)
def test_binary32_rounding_in_one_pass_is_to_f32_of_each(values: list[float]) -> None:
    """A search page's scores go to binary32 in one pass: the same values, overflow to
    infinity included, as rounding each."""
    rounded = to_f32_all(values)
    assert [struct.pack("<d", v) for v in rounded] == [struct.pack("<d", to_f32(v)) for v in values]

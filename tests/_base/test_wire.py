"""taguru_eval._base.wire: msgspec decodes; a refusal is worded as the strict readers word it."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from taguru_eval._base import jsonstrict as js
from taguru_eval._base.wire import F32, U32, U64, convert


class Inner(msgspec.Struct):
    rank: U64
    score: F32


class Shape(msgspec.Struct):
    name: str
    paragraph: U32
    weight: float
    ran: bool
    lanes: list[Inner]
    stats: dict[str, Any]
    inner: Inner | None = None
    note: str | None = None
    counts: dict[str, U64] = {}


VALID: dict[str, Any] = {
    "name": "a.md",
    "paragraph": 2,
    "weight": 0.5,
    "ran": True,
    "lanes": [{"rank": 1, "score": 0.25}],
    "stats": {"anything": [1, "x", None]},
}


def _with(**changes: object) -> dict[str, Any]:
    payload = dict(VALID)
    payload.update(changes)
    return {key: value for key, value in payload.items() if value is not _DROP}


_DROP = object()


def test_a_fitting_payload_converts() -> None:
    shape = convert({**VALID, "inner": None, "unknown": 1}, Shape)
    assert (shape.name, shape.paragraph, shape.lanes[0].rank, shape.inner) == ("a.md", 2, 1, None)
    assert convert({**VALID, "weight": 3}, Shape).weight == 3.0  # an integer is a number


@pytest.mark.parametrize(
    ("payload", "detail"),
    [
        (_with(name=_DROP), "missing field `name`"),
        (_with(name=3), "name: invalid type: integer `3`, expected a string"),
        (_with(paragraph=-1), "paragraph: invalid value: integer `-1`, expected u32"),
        (_with(paragraph=2**32), "paragraph: invalid value: integer `4294967296`, expected u32"),
        (_with(paragraph=1.0), "paragraph: invalid type: floating point `1.0`, expected u32"),
        (_with(paragraph=True), "paragraph: invalid type: boolean `true`, expected u32"),
        (_with(weight="x"), 'weight: invalid type: string "x", expected f64'),
        (_with(ran=0), "ran: invalid type: integer `0`, expected a boolean"),
        (_with(lanes={}), "lanes: invalid type: map, expected a sequence"),
        (_with(lanes=[{"rank": 1}]), "lanes[0]: missing field `score`"),
        (
            _with(lanes=[{"rank": -2, "score": 1}]),
            "lanes[0].rank: invalid value: integer `-2`, expected u64",
        ),
        (
            _with(lanes=[{"rank": 1, "score": False}]),
            "lanes[0].score: invalid type: boolean `false`, expected f32",
        ),
        (_with(stats=None), "stats: invalid type: null, expected a map"),
        (
            _with(inner={"rank": 1, "score": "s"}),
            'inner.score: invalid type: string "s", expected f32',
        ),
        (_with(note=[]), "note: invalid type: sequence, expected a string"),
        (_with(counts={"a": 1, "b": -1}), "counts.b: invalid value: integer `-1`, expected u64"),
        ([VALID], "invalid type: sequence, expected a map"),
    ],
)
def test_a_refusal_names_the_first_field_in_serde_s_words(payload: object, detail: str) -> None:
    with pytest.raises(js.JsonShapeError) as caught:
        convert(payload, Shape)
    assert caught.value.detail == detail


def test_fields_are_judged_in_declaration_order() -> None:
    with pytest.raises(js.JsonShapeError) as caught:
        convert(_with(name=_DROP, paragraph="x"), Shape)
    assert caught.value.detail == "missing field `name`"


def test_a_refusal_the_readers_do_not_make_keeps_msgspec_s_words() -> None:
    with pytest.raises(js.JsonShapeError) as caught:
        convert(_with(weight=10**400), Shape)
    assert caught.value.detail == "weight: number out of range, expected f64"
    with pytest.raises(js.JsonShapeError) as caught:
        convert(_with(lanes=[{"rank": 1, "score": 10**400}]), Shape)
    assert caught.value.detail == "lanes[0].score: number out of range"


_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**40), 2**40),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=3),
)
_values = st.recursive(
    _scalars,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3)
    ),
    max_leaves=6,
)


@st.composite
def _near_valid(draw: st.DrawFn) -> dict[str, Any]:
    """VALID with some fields dropped or replaced by arbitrary JSON values."""
    payload: dict[str, Any] = {**VALID, "inner": {"rank": 3, "score": 1}, "counts": {"x": 1}}
    for key in draw(st.lists(st.sampled_from(sorted(payload)), max_size=3, unique=True)):
        if draw(st.booleans()):
            del payload[key]
        else:
            payload[key] = draw(_values)
    return payload


@settings(max_examples=300, deadline=None)
@given(_near_valid())
def test_the_walk_refuses_exactly_what_msgspec_refuses(payload: dict[str, Any]) -> None:
    """The wording is derived from the declaration: whenever msgspec refuses, the
    walk names a field (never falls back), and it never refuses what msgspec takes."""
    try:
        msgspec.convert(payload, Shape)
    except msgspec.ValidationError:
        with pytest.raises(js.JsonShapeError) as caught:
            convert(payload, Shape)
        assert "expected" in caught.value.detail or "missing field" in caught.value.detail
        assert " - at `$" not in caught.value.detail
    else:
        convert(payload, Shape)

"""A shape's key order and Polars dtype derive from its declaration alone."""

from __future__ import annotations

from typing import Annotated, NotRequired, TypedDict

import polars as pl
import pytest

from taguru_eval.tables import derive
from taguru_eval.tables.flatten import _LANE_OUTPUT, _REFUSAL_OUTPUT, CASE_BLOCK
from taguru_eval.tables.shapes import (
    Binary32,
    CallRecord,
    EvidenceOutcome,
    HitLanes,
    Int32,
    LaneOutput,
    RefusalOutput,
)


class Inner(TypedDict):
    rank: Int32
    score: Binary32


class Outer(TypedDict):
    name: str
    count: int
    share: float
    flag: NotRequired[bool]
    maybe: NotRequired[str | None]
    names: list[str]
    inner: Inner
    inners: NotRequired[list[Inner]]
    narrow: Annotated[int, pl.UInt8()]


def test_keys_are_in_declaration_order_and_split_by_required() -> None:
    names = ("name", "count", "share", "flag", "maybe", "names", "inner", "inners", "narrow")
    assert derive.keys(Outer) == names
    assert derive.keys(Outer, required=False) == ("flag", "maybe", "inners")
    assert derive.keys(Outer, required=True) == tuple(
        name for name in names if name not in ("flag", "maybe", "inners")
    )
    # total=False: every key optional.
    assert derive.keys(HitLanes, required=False) == ("bm25", "vector")
    assert derive.keys(HitLanes, required=True) == ()


def test_dtypes_follow_the_python_types_unless_annotated() -> None:
    inner = pl.Struct({"rank": pl.Int32(), "score": pl.Float32()})
    assert derive.struct(Outer) == pl.Struct(
        {
            "name": pl.String(),
            "count": pl.Int64(),
            "share": pl.Float64(),
            "flag": pl.Boolean(),
            "maybe": pl.String(),
            "names": pl.List(pl.String()),
            "inner": inner,
            "inners": pl.List(inner),
            "narrow": pl.UInt8(),
        }
    )
    assert list(derive.schema(Outer)) == list(derive.keys(Outer))


def test_omit_leaves_a_field_out_wherever_its_shape_is_nested() -> None:
    derived = derive.schema(Outer, {Inner: ("score",)})
    assert derived["inner"] == pl.Struct({"rank": pl.Int32()})
    assert derived["inners"] == pl.List(pl.Struct({"rank": pl.Int32()}))
    with pytest.raises(ValueError, match=r"Inner declares no \['rnak'\] to omit"):
        derive.schema(Outer, {Inner: ("rnak",)})


class Open(TypedDict):
    counts: dict[str, int]


class Either(TypedDict):
    value: int | str


@pytest.mark.parametrize("shape", [Open, Either])
def test_a_type_with_no_polars_dtype_is_refused(shape: type) -> None:
    with pytest.raises(TypeError, match="no Polars dtype"):
        derive.schema(shape)


def test_the_nested_frame_holds_the_lane_outputs_less_what_the_tables_never_read() -> None:
    assert list(_LANE_OUTPUT) == list(derive.keys(LaneOutput))
    assert list(_REFUSAL_OUTPUT) == list(derive.keys(RefusalOutput))
    call = _LANE_OUTPUT["calls"]
    assert isinstance(call, pl.List) and isinstance(call.inner, pl.Struct)
    assert [field.name for field in call.inner.fields] == list(derive.keys(CallRecord)[2:])
    assert call.inner.to_schema()["seq"] == pl.Int32()
    evidence = _LANE_OUTPUT["evidence"]
    assert isinstance(evidence, pl.Struct)
    assert [field.name for field in evidence.fields] == [
        "outcome",
        "message",
        "latency_ms",
        "omitted_by_reason",
        "reranker",
    ]
    # The artifact's evidence block is type-checked whole, items included.
    case_evidence = CASE_BLOCK.to_schema()["evidence"]
    assert isinstance(case_evidence, pl.Struct)
    assert [field.name for field in case_evidence.fields] == list(derive.keys(EvidenceOutcome))

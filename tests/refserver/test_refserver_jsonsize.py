"""The evidence size walker agrees with the serialiser it stands in for."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from support.paths import WIRE

from taguru_eval._base.text import F32, dumps_json
from taguru_refserver.jsonsize import json_size


def serialised(value: Any) -> tuple[int, int]:
    text = dumps_json(value)
    ascii_count = sum(1 for ch in text if ord(ch) < 0x80)
    return len(text.encode("utf-8")), ascii_count + 4 * (len(text) - ascii_count)


scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**64 - 1),
    st.floats(allow_nan=False, allow_infinity=False),
    st.floats(allow_nan=False, allow_infinity=False, width=32).map(F32),
    st.text(),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(), inner, max_size=4)
    ),
    max_leaves=20,
)


@given(values)
def test_sizes_match_the_serialised_text(value: Any) -> None:
    assert json_size(value) == serialised(value)


def test_the_recorded_evidence_items_measure_as_recorded() -> None:
    result = json.loads((WIRE / "evidence_mixed_lanes.json").read_text("utf-8"))["response"]
    for item in result["result"]["items"]:
        measured = {k: v for k, v in item.items() if k not in ("bytes", "estimated_tokens")}
        if "passage" in measured:
            passage = measured["passage"]
            passage["score"] = F32(passage["score"])
            for lane in passage["lanes"].values():
                lane["score"] = F32(lane["score"])
        size, quarters = json_size(measured)
        assert (size, -(-quarters // 4)) == (item["bytes"], item["estimated_tokens"])

"""Conformance vectors for Distribution / Ratio / nearest rank (EVALUATE.md §5.1)."""

from __future__ import annotations

import math
from typing import Any

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.vectors import vector_cases

from taguru_eval.score.stats import (
    distribution,
    distribution_exprs,
    distribution_frame,
    grouped_sequential_sum,
    position_in_group,
    ratio,
)

_NON_FINITE = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}


def nearest_rank_index(n: int, p: int) -> int:
    """The oracle: 0-based index of the ``p``-th nearest-rank percentile among ``n``
    sorted samples, in plain integers (EVALUATE.md §5.1), beside the scorer's expression."""
    rank = (p * n + 99) // 100
    return min(max(rank, 1), n) - 1


def _sample(value: Any) -> float:
    return _NON_FINITE[value] if isinstance(value, str) else float(value)


@pytest.mark.parametrize("case", vector_cases("nearest_rank"))
def test_nearest_rank(case: dict[str, Any]) -> None:
    expected = case["expected"]
    assert set(expected) <= {"value"}, f"unknown expected keys {set(expected)}"
    values = case["input"]["sorted"]
    p = case["input"]["p"]
    assert values[nearest_rank_index(len(values), p)] == expected["value"]
    # The expression path (what the scorer uses) picks the same sample.
    frame = pl.DataFrame({"x": values}, schema={"x": pl.Float64})
    row = frame.select(distribution_exprs("x")).row(0, named=True)
    if p in (50, 90, 99):
        assert row[f"p{p}"] == expected["value"]


@pytest.mark.parametrize("case", vector_cases("distribution", "distribution"))
def test_distribution(case: dict[str, Any]) -> None:
    got = distribution(_sample(v) for v in case["input"]["samples"])
    assert list(got) == ["n", "min", "p50", "p90", "p99", "max", "mean", "sum"]
    for key, want in case["expected"].items():
        if key == "mean_at_least":
            assert got["mean"] is not None and got["mean"] >= want
        elif key in got:
            have = got[key]  # type: ignore[literal-required]
            assert have == want and type(have) is type(want), (key, have, want)
        else:
            pytest.fail(f"unknown expected key {key!r}")


@pytest.mark.parametrize("case", vector_cases("distribution", "ratio"))
def test_ratio(case: dict[str, Any]) -> None:
    got = ratio(case["input"]["numerator"], case["input"]["n"])
    assert list(got) == ["value", "n", "numerator"]
    for key, want in case["expected"].items():
        if key == "value_approx":
            assert got["value"] is not None and abs(got["value"] - want) < 1e-12
        elif key == "value_at_least":
            assert got["value"] is not None and got["value"] >= want
        elif key in got:
            assert got[key] == want  # type: ignore[literal-required]
        else:
            pytest.fail(f"unknown expected key {key!r}")


@pytest.mark.parametrize(
    ("n", "p", "index"),
    [
        (1, 50, 0),
        (1, 99, 0),
        (2, 50, 0),
        (2, 90, 1),
        (2, 99, 1),
        (4, 50, 1),
        (4, 90, 3),
        (10, 50, 4),
        (10, 90, 8),
        (10, 99, 9),
        (100, 50, 49),
        (100, 90, 89),
        (100, 99, 98),
    ],
)
def test_nearest_rank_edges(n: int, p: int, index: int) -> None:
    assert nearest_rank_index(n, p) == index
    got = distribution(float(i + 1) for i in reversed(range(n)))
    assert got[f"p{p}"] == float(index + 1)  # type: ignore[literal-required]


def test_no_samples_have_no_percentile() -> None:
    assert distribution([])["p50"] is None


def _sequential_sum(values: list[float]) -> float:
    total = 0.0
    for value in values:
        total += value
    return total


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.floats(allow_nan=False, allow_infinity=False, min_value=-1e12, max_value=1e12),
        max_size=300,
    )
)
def test_sum_is_the_sequential_fold_over_sorted_samples(samples: list[float]) -> None:
    got = distribution(samples)
    finite = sorted(samples)
    if not finite:
        assert got["sum"] is None and got["mean"] is None
        return
    want = _sequential_sum(finite)
    assert got["sum"] is not None
    # Bit-identical (a -0.0 start aside, which the fold from 0.0 turns into 0.0).
    assert got["sum"] == want
    assert got["mean"] == want / len(finite)


def test_sum_differs_from_pairwise_where_order_matters() -> None:
    # 1e16 + 1 + 1 ... sequentially loses every 1; fsum would not.
    samples = [1.0] * 10 + [1e16]
    got = distribution(samples)
    assert got["sum"] == _sequential_sum(sorted(samples))
    assert got["sum"] == math.fsum(samples)  # sorted ascending: small ones first survive
    big_first = [-1e16] + [1.0] * 3 + [1e16]
    assert distribution(big_first)["sum"] == _sequential_sum(sorted(big_first))


def test_group_by_distribution_matches_plain_function() -> None:
    frame = pl.DataFrame({"g": ["a", "a", "b", "a"], "x": [3.0, 1.0, 5.0, 2.0]})
    rows = frame.group_by("g", maintain_order=True).agg(distribution_exprs("x")).to_dicts()
    assert rows[0] == {"g": "a", **distribution([3.0, 1.0, 2.0])}
    assert rows[1] == {"g": "b", **distribution([5.0])}


def test_latency_integers_become_floats() -> None:
    frame = pl.DataFrame({"ms": [12, 3, 7]})
    row = frame.select(distribution_exprs("ms")).row(0, named=True)
    assert row["min"] == 3.0 and isinstance(row["min"], float)
    assert row["n"] == 3 and isinstance(row["n"], int)


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(min_value=0, max_value=6),
            st.sampled_from([1e16, -1e16, 1.0, 0.1, 3.0, 1e-8, 2.5e-3, -7.25]),
        ),
        min_size=1,
        max_size=80,
    )
)
def test_grouped_sequential_sum_is_the_row_order_fold(rows: list[tuple[int, float]]) -> None:
    frame = pl.DataFrame({"g": [g for g, _ in rows], "x": [x for _, x in rows]})
    want: dict[int, float] = {}
    for group, value in rows:
        want[group] = want.get(group, 0.0) + value
    got = grouped_sequential_sum(frame, "g", "x")
    assert got["g"].to_list() == sorted(want)
    assert dict(got.iter_rows()) == want


def test_position_in_group() -> None:
    frame = pl.DataFrame({"g": [1, 1, 1, 4, 7, 7]})
    assert frame.select(position_in_group("g").alias("p"))["p"].to_list() == [0, 1, 2, 0, 0, 1]


def test_distribution_frame_by_group_matches_plain() -> None:
    frame = pl.DataFrame({"m": ["b", "a", "b", "b"], "x": [3.0, math.inf, 1.0, 2.0]})
    rows = distribution_frame(frame, "x", ["m"]).to_dicts()
    by_metric = {row.pop("m"): row for row in rows}
    assert by_metric["b"] == distribution([3.0, 1.0, 2.0])
    assert by_metric["a"] == distribution([])

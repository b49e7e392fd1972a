"""Distribution and Ratio (EVALUATE.md §5.1): the one place percentiles are computed.

Nearest rank is computed with integers, ``rank = (p*n + 99) // 100`` clamped
to ``1..=n``, and read by index from the sorted samples — Polars' quantile
interpolation modes implement other rules. ``sum`` is the left-to-right
IEEE sum of the sorted samples: Polars' ``cum_sum`` is a sequential prefix
scan, so its last element is exactly that fold (``Series.sum`` may reorder
additions, and Python's ``sum`` compensates rounding since 3.12, so neither
is used), except that it starts from -0.0 as Rust's does: the sum of samples that
are all -0.0 is -0.0. ``tests/score/test_stats_vectors.py`` pins the equality bit
for bit. Zeros of both signs sort as equals (taguru's ``total_cmp`` puts -0.0
first); no metric holds both, as the only -0.0 is an all-missed nDCG and nDCG is
never +0.0.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import TypedDict

import polars as pl

from taguru_eval._base.jsonstrict import I64_MAX

PERCENTILES = (50, 90, 99)
DISTRIBUTION_KEYS = ("n", "min", "p50", "p90", "p99", "max", "mean", "sum")
RATIO_KEYS = ("value", "n", "numerator")


class Distribution(TypedDict):
    n: int
    min: float | None
    p50: float | None
    p90: float | None
    p99: float | None
    max: float | None
    mean: float | None
    sum: float | None


class Ratio(TypedDict):
    value: float | None
    n: int
    numerator: int | None


def _finite_sorted(col: str) -> pl.Expr:
    values = pl.col(col).cast(pl.Float64)
    return values.filter(values.is_finite()).sort()


def _percentile(values: pl.Expr, count: pl.Expr, p: int) -> pl.Expr:
    # The nearest rank, clamped to 1..=n (module docstring); an empty group
    # indexes out of bounds and yields null.
    rank = pl.max_horizontal(pl.min_horizontal((p * count + 99) // 100, count), 1)
    return values.get(rank - 1, null_on_oob=True)


def distribution_exprs(col: str, *, presorted: bool = False) -> list[pl.Expr]:
    """Aggregations giving the Distribution fields of ``col``, named as its keys.

    Usable in ``select`` or in ``group_by(...).agg(...)``; non-finite and null
    samples are dropped first. ``presorted=True`` skips that step for a
    column already filtered to finite values and sorted ascending within
    each group (see :func:`distribution_frame`).
    """
    values = pl.col(col).cast(pl.Float64) if presorted else _finite_sorted(col)
    count = values.len().cast(pl.Int64)
    # taguru's fold starts from -0.0, Polars' prefix scan from 0.0: they differ only
    # when every sample is -0.0 (an all-missed nDCG distribution), where taguru's sum
    # and mean are -0.0 (ERRATA row 25). A zero is told from a tiny negative first:
    # 1/x overflows to -inf for a subnormal x as it does for -0.0.
    negative_zero = (values == 0.0) & (1.0 / values == -math.inf)
    total = (
        pl.when(negative_zero.all() & (count > 0))
        .then(pl.lit(-0.0))
        .otherwise(values.cum_sum().last())
    )
    return [
        count.alias("n"),
        values.first().alias("min"),
        *[_percentile(values, count, p).alias(f"p{p}") for p in PERCENTILES],
        values.last().alias("max"),
        (total / count).alias("mean"),
        total.alias("sum"),
    ]


def distribution_frame(frame: pl.DataFrame, col: str, by: list[str] | None = None) -> pl.DataFrame:
    """Distribution of ``col`` over ``frame`` (one row, or one row per ``by`` group).

    Filters and sorts once for all groups, then aggregates the sorted runs;
    groups come out in order of first appearance.
    """
    values = pl.col(col).cast(pl.Float64)
    prepared = frame.select(*(by or []), values.alias(col)).filter(values.is_finite())
    if not by:
        return prepared.sort(col).select(distribution_exprs(col, presorted=True))
    # Sorting within each group through ``over`` keeps the values in their
    # group's row slots, so the ordered group_by sees each group sorted; a
    # multi-column sort on (by, col) would row-encode every key and is several
    # times slower.
    stats = (
        prepared.with_columns(pl.col(col).sort().over(by))
        .group_by(by, maintain_order=True)
        .agg(distribution_exprs(col, presorted=True))
    )
    # A group whose samples were all dropped still gets its (n = 0, nulls) row.
    groups = frame.select(by).unique(maintain_order=True)
    return groups.join(stats, on=by, how="left").with_columns(pl.col("n").fill_null(0))


def distribution(samples: Iterable[float]) -> Distribution:
    """The Distribution of plain samples (computed by :func:`distribution_exprs`)."""
    frame = pl.DataFrame({"x": list(samples)}, schema={"x": pl.Float64})
    row = distribution_frame(frame, "x").row(0, named=True)
    return {
        "n": int(row["n"]),
        "min": row["min"],
        "p50": row["p50"],
        "p90": row["p90"],
        "p99": row["p99"],
        "max": row["max"],
        "mean": row["mean"],
        "sum": row["sum"],
    }


def position_in_group(group: str) -> pl.Expr:
    """0-based position of each row within its run of equal ``group`` values.

    The frame must already be sorted (or at least contiguous) by ``group``;
    computed without ``over`` so it stays a couple of linear scans.
    """
    column = pl.col(group)
    first = (column != column.shift(1)).fill_null(True)
    row = pl.int_range(pl.len(), dtype=pl.UInt32)
    return row - pl.when(first).then(row).forward_fill()


def grouped_sequential_sum(
    frame: pl.DataFrame, group: str, value: str, alias: str = "sum"
) -> pl.DataFrame:
    """Per ``group``, the left-to-right IEEE sum (from 0.0) of ``value`` in row order.

    Polars' grouped ``sum`` compensates rounding and a grouped ``cum_sum`` is
    slow with many small groups, so the fold runs position by position over
    all groups at once: step ``j`` adds every group's ``j``-th value to its
    accumulator. Groups come out sorted by key; null values must be filled
    by the caller.
    """
    ordered = frame.select(group, value).sort(group, maintain_order=True)
    column = pl.col(group)
    first = (column != column.shift(1)).fill_null(True)
    ordered = ordered.with_columns(
        (first.cum_sum() - 1).cast(pl.UInt32).alias("__slot"),
        position_in_group(group).alias("__position"),
    )
    groups = ordered.filter(first).select(group)
    totals = pl.zeros(groups.height, dtype=pl.Float64, eager=True).alias(alias)
    for step in ordered.partition_by("__position", maintain_order=True, include_key=False):
        slots = step["__slot"]
        totals = totals.scatter(slots, totals.gather(slots) + step[value].cast(pl.Float64))
    return groups.with_columns(totals)


def ratio(numerator: int, n: int) -> Ratio:
    """``{value, n, numerator}``; ``n == 0`` gives null value and numerator."""
    if n == 0:
        return {"value": None, "n": 0, "numerator": None}
    return {"value": numerator / n, "n": n, "numerator": numerator}


def saturated_ratio(numerator: int, n: int) -> Ratio:
    """:func:`ratio` of counts that may pass int64 (sums of taguru's u64 counts):
    the value from the exact counts, ``n``/``numerator`` saturated at int64's
    maximum, as the metrics table's int64 columns hold them."""
    exact = ratio(numerator, n)
    if exact["numerator"] is None:
        return exact
    return {
        "value": exact["value"],
        "n": min(n, I64_MAX),
        "numerator": min(numerator, I64_MAX),
    }

"""Per-tag slices: a run's main metrics broken down by the cases' ``options.tags``.

An evaluation.json does not record tags; a run made by taguru_eval keeps each
case's tags in the run store's ``case_lanes.tags`` (and in
``Run.tables.case_lanes``), which is where these frames take them from. A
case with several tags counts in each of its slices; a case with none is in
``(no tag)``; the ``(all cases)`` slice comes first for reference. A slice's
value of a metric is the mean over its cases that computed the metric, as the
run's own aggregate is.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

import polars as pl

from taguru_eval.catalog import CATALOG, COMPARISON_METRICS, Catalog
from taguru_eval.compare.drivers import BETTER, CHANGED, WORSE, moved_metrics
from taguru_eval.compare.model import base_column, head_column
from taguru_eval.compare.tags import ALL_CASES, NO_TAG, case_tags, slice_rank, tag_membership

SLICE_METRICS: Final = COMPARISON_METRICS
"""The main metrics a slice shows: the nine per-case metrics compare classifies by."""

__all__ = ["ALL_CASES", "NO_TAG", "SLICE_METRICS", "case_tags", "tag_slice_changes", "tag_slices"]


def _slice_order(frame: pl.DataFrame) -> pl.DataFrame:
    return frame.sort([slice_rank(), pl.col("tag")])


def tag_slices(
    cases: pl.DataFrame,
    tags: pl.DataFrame,
    metrics: Sequence[str] = SLICE_METRICS,
    catalog: Catalog = CATALOG,
) -> pl.DataFrame:
    """One row per tag: ``tag``, ``cases``, then one column per metric (named by the
    metric) holding its mean over the slice's cases that computed it."""
    columns = {metric: catalog.per_case[metric].column for metric in metrics}
    joined = tag_membership(tags).join(
        cases.select("case_id", *columns.values()), on="case_id", how="inner"
    )
    grouped = joined.group_by("tag").agg(
        pl.len().cast(pl.Int64).alias("cases"),
        *[
            pl.col(column).cast(pl.Float64).mean().alias(metric)
            for metric, column in columns.items()
        ],
    )
    return _slice_order(grouped)


def tag_slice_changes(
    comparison_cases: pl.DataFrame,
    tags: pl.DataFrame,
    metrics: Sequence[str] = SLICE_METRICS,
    catalog: Catalog = CATALOG,
) -> pl.DataFrame:
    """Each slice's main metrics on both sides of a comparison: ``tag``, ``cases``,
    ``metric``, ``base``, ``head``, ``delta``, ``direction`` (better / worse by
    the catalog's direction: a description, not a test — the slices join no
    significance family), only the (tag, metric) pairs that moved, the worse
    first. ``comparison_cases``: :attr:`Comparison.cases`;
    ``tags``: the case tags of the HEAD run (a case's slice is what the
    current eval set says)."""
    membership = tag_membership(tags)
    joined = membership.join(comparison_cases, on="case_id", how="inner")
    sizes = joined.group_by("tag").agg(pl.len().cast(pl.Int64).alias("cases"))
    long = pl.concat(
        [
            joined.group_by("tag").agg(
                pl.lit(metric).alias("metric"),
                pl.col(base_column(metric)).cast(pl.Float64).mean().alias("base"),
                pl.col(head_column(metric)).cast(pl.Float64).mean().alias("head"),
            )
            for metric in metrics
        ]
    ).with_columns(
        (pl.col("head") - pl.col("base")).alias("delta"),
        pl.lit("distribution").alias("statistic"),
    )
    moved = (
        pl.concat(
            [
                moved_metrics(part.drop("tag"), catalog).with_columns(pl.lit(tag).alias("tag"))
                for (tag,), part in long.group_by("tag")
            ]
        )
        if long.height
        else long.with_columns(pl.lit(None, dtype=pl.String).alias("direction"))
    )
    rank = pl.col("direction").replace_strict(
        {WORSE: 0, BETTER: 1, CHANGED: 2}, default=3, return_dtype=pl.Int8
    )
    return (
        moved.join(sizes, on="tag", how="left")
        .sort([rank, pl.col("delta").abs(), pl.col("tag")], descending=[False, True, False])
        .select("tag", "cases", "metric", "base", "head", "delta", "direction")
    )

"""The reader's view of a comparison: what moved, and which metrics drove each case.

taguru's console summary (§6.10) lists every aggregate metric, changed or not,
and names regressed cases only. These frames are the view a reader needs
beside it, computed from :attr:`Comparison.cases` and ``.metrics``:

* :func:`moved_metrics` — only the aggregate metrics whose value moved, each
  judged better or worse by the catalog's direction;
* :func:`case_drivers` — one row per improved or regressed case with the
  metric(s) that drove its classification and the ones that moved the other
  way (a case regressed on ``diversity.sources`` while its recall improved);
* :func:`driver_groups` — those cases grouped by kind and drivers, so "six
  cases regressed on diversity.sources only" is one line, with how many of
  them improved elsewhere and a few example ids.

They take frames, not a :class:`~taguru_eval.compare.report.Comparison`, so
the comparison's methods can call them without an import cycle.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

import polars as pl

from taguru_eval.catalog import CATALOG, Catalog
from taguru_eval.compare.model import (
    EPSILON,
    IMPROVED,
    REGRESSED,
    delta_column,
    direction_column,
)

EXAMPLES: Final = 5
"""Example case ids a driver group names."""

DRIVER_SCHEMA: Final = pl.Schema(
    {
        "case_id": pl.String(),
        "kind": pl.String(),
        "drivers": pl.List(pl.String),
        "driver_deltas": pl.List(pl.Float64),
        "against": pl.List(pl.String),
        "against_deltas": pl.List(pl.Float64),
    }
)


BETTER, WORSE, CHANGED = "better", "worse", "changed"
"""Which way an aggregate metric moved, by the catalog's direction: a description,
never a verdict (only a significance test calls a move regressed or improved)."""

_VERDICT_ORDER: Final = {
    "regressed": 0,
    "inconclusive": 1,
    "improved": 2,
    "no significant change": 3,
    "not tested": 4,
}


def moved_metrics(
    metrics: pl.DataFrame, catalog: Catalog = CATALOG, *, tests: pl.DataFrame | None = None
) -> pl.DataFrame:
    """The aggregate metrics that moved: ``metric``, ``statistic``, ``base``, ``head``,
    ``delta``, ``direction`` (``better`` / ``worse`` by the catalog's
    ``higher_is_better``; ``changed`` for a metric without a direction or a
    value on one side only), ``verdict`` and ``p_adjusted`` (the whole-run test
    of ``tests``, :attr:`Significance.frame`; ``not tested`` for a metric it
    does not cover, such as latency). Regressed first, then inconclusive,
    improved, no significant change and not tested; by the size of the move
    within each.

    ``metrics``: :attr:`Comparison.metrics` (``metric``, ``statistic``, ``base``,
    ``head``, ``delta``); a move within 1e-9 is no move (§6.4).
    """
    higher = {name: definition.higher_is_better for name, definition in catalog.items()}
    better = pl.col("metric").replace_strict(higher, default=None, return_dtype=pl.Boolean)
    moved = pl.col("delta").abs() > EPSILON
    one_sided = pl.col("base").is_null() != pl.col("head").is_null()
    direction = (
        pl.when(one_sided | better.is_null())
        .then(pl.lit(CHANGED))
        .when((pl.col("delta") > 0) == better)
        .then(pl.lit(BETTER))
        .otherwise(pl.lit(WORSE))
    )
    verdicts = (
        pl.DataFrame(schema={"metric": pl.String, "verdict": pl.String, "p_adjusted": pl.Float64})
        if tests is None
        else tests.filter(pl.col("tag").is_null() & (pl.col("n") > 0)).select(
            "metric", "verdict", "p_adjusted"
        )
    )
    order = pl.col("verdict").replace_strict(_VERDICT_ORDER, default=4, return_dtype=pl.Int8)
    return (
        metrics.filter(moved.fill_null(False) | one_sided)
        .with_columns(direction.alias("direction"))
        .join(verdicts, on="metric", how="left")
        .with_columns(pl.col("verdict").fill_null("not tested"))
        .sort([order, pl.col("delta").abs()], descending=[False, True], nulls_last=True)
    )


def case_drivers(cases: pl.DataFrame, compared: Sequence[str]) -> pl.DataFrame:
    """One row per improved or regressed case (regressed first, then case_id order):
    ``case_id``, ``kind``, ``drivers`` (the metrics whose own direction is the
    case's kind — any one regressed metric makes a case regressed, §6.4),
    ``driver_deltas``, ``against`` (metrics that moved the other way; only a
    regressed case can have them), ``against_deltas``.

    ``cases``: :attr:`Comparison.cases`; ``compared``: the metrics cases were
    classified by, in order (:attr:`Comparison.compared`).
    """
    changed = cases.filter(pl.col("kind").is_in([IMPROVED, REGRESSED]))
    if changed.height == 0 or not compared:
        return pl.DataFrame(schema=DRIVER_SCHEMA)
    long = pl.concat(
        [
            changed.select(
                "case_id",
                "kind",
                pl.lit(position).alias("position"),
                pl.lit(metric).alias("metric"),
                pl.col(delta_column(metric)).cast(pl.Float64).alias("delta"),
                pl.col(direction_column(metric)).cast(pl.String).alias("direction"),
            )
            for position, metric in enumerate(compared)
        ]
    ).filter(pl.col("direction").is_in([IMPROVED, REGRESSED]))
    drives = pl.col("direction") == pl.col("kind")
    per_case = (
        long.sort("position")
        .group_by("case_id", "kind", maintain_order=True)
        .agg(
            pl.col("metric").filter(drives).alias("drivers"),
            pl.col("delta").filter(drives).alias("driver_deltas"),
            pl.col("metric").filter(~drives).alias("against"),
            pl.col("delta").filter(~drives).alias("against_deltas"),
        )
    )
    rank = pl.col("kind").replace_strict({REGRESSED: 0, IMPROVED: 1}, return_dtype=pl.Int8)
    return per_case.sort([rank, pl.col("case_id")]).select(DRIVER_SCHEMA.names())


def driver_groups(drivers: pl.DataFrame, *, examples: int = EXAMPLES) -> pl.DataFrame:
    """:func:`case_drivers` grouped by kind and driver set: ``kind``, ``drivers``
    (``+``-joined, e.g. ``diversity.sources``), ``cases``, ``improved_elsewhere``
    (how many of them moved the other way on some metric), ``against`` (those
    metrics with their case counts, e.g. ``recall.mrr (5), recall.ndcg (2)``),
    ``examples`` (the first ``examples`` case ids). Regressed groups first,
    then by size."""
    schema = pl.Schema(
        {
            "kind": pl.String(),
            "drivers": pl.String(),
            "cases": pl.Int64(),
            "improved_elsewhere": pl.Int64(),
            "against": pl.String(),
            "examples": pl.List(pl.String),
        }
    )
    if drivers.height == 0:
        return pl.DataFrame(schema=schema)
    keyed = drivers.with_columns(pl.col("drivers").list.join(" + ").alias("key"))
    against = (
        keyed.select("kind", "key", pl.col("against").alias("metric"))
        .explode("metric")
        .drop_nulls("metric")
        .group_by("kind", "key", "metric")
        .len("n")
        .sort(["n", "metric"], descending=[True, False])
        .group_by("kind", "key", maintain_order=True)
        .agg(pl.format("{} ({})", "metric", "n").str.join(", ").alias("against"))
    )
    groups = keyed.group_by("kind", "key", maintain_order=True).agg(
        pl.len().cast(pl.Int64).alias("cases"),
        (pl.col("against").list.len() > 0).sum().cast(pl.Int64).alias("improved_elsewhere"),
        pl.col("case_id").head(examples).alias("examples"),
    )
    rank = pl.col("kind").replace_strict({REGRESSED: 0, IMPROVED: 1}, return_dtype=pl.Int8)
    return (
        groups.join(against, on=["kind", "key"], how="left")
        .with_columns(pl.col("against").fill_null(""))
        .sort([rank, pl.col("cases"), pl.col("key")], descending=[False, True, False])
        .select(
            "kind",
            pl.col("key").alias("drivers"),
            "cases",
            "improved_elsewhere",
            "against",
            "examples",
        )
    )

"""What a chart embeds: Polars aggregations with one row per mark the chart draws.

A chart of a 100,000-case run cannot embed 100,000 rows: the page would be
megabytes of JSON and Altair refuses past its 5,000-row limit (which is never
raised or disabled here). Every chart builder in :mod:`.charts` therefore
gets its data from these functions — binned distributions, the worst-N cases,
one point per run and metric, per-lane latency summaries — whose row counts
are bounded by their arguments (bins, N, metrics, runs), not by the cases.

The metric's own facts come from the catalog: a ratio lives in [0, 1], and
``higher_is_better`` decides what "worst" means and which way colour runs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Final, Literal

import polars as pl

from taguru_eval.catalog import ANSWERS_BLOCK, CATALOG, RATIO, Catalog
from taguru_eval.score.stats import distribution_frame

ROW_LIMIT: Final = 5000
"""Altair's default ``max_rows``; no chart data set may reach it (checked in :mod:`.charts`)."""

BINS: Final = 10
WORST_CASES: Final = 25

Direction = Literal["higher is better", "lower is better", "no direction"]
HIGHER: Final = "higher is better"
LOWER: Final = "lower is better"
NEUTRAL: Final = "no direction"


def direction_of(metric: str, catalog: Catalog = CATALOG) -> Direction:
    """The catalog's ``higher_is_better`` as a legend label (unknown metric: no direction)."""
    definition = catalog.get(metric)
    if definition is None or definition.higher_is_better is None:
        return NEUTRAL
    return HIGHER if definition.higher_is_better else LOWER


def arrow_of(metric: str, catalog: Catalog = CATALOG) -> str:
    """``↑`` (higher is better), ``↓`` (lower is better) or ``""``."""
    return {HIGHER: "↑", LOWER: "↓", NEUTRAL: ""}[direction_of(metric, catalog)]


def domain_of(metric: str, catalog: Catalog = CATALOG) -> tuple[float, float] | None:
    """The metric's own value domain: [0, 1] for a ratio (share or per-case fraction)."""
    definition = catalog.get(metric)
    if definition is not None and definition.unit == RATIO:
        return (0.0, 1.0)
    return None


def direction_frame(metrics: Sequence[str], catalog: Catalog = CATALOG) -> pl.DataFrame:
    """``metric``, ``direction``, ``higher``, ``lo``, ``hi`` for each metric (catalog facts)."""
    domains = [domain_of(metric, catalog) for metric in metrics]
    return pl.DataFrame(
        {
            "metric": list(metrics),
            "direction": [direction_of(metric, catalog) for metric in metrics],
            "lo": [None if domain is None else domain[0] for domain in domains],
            "hi": [None if domain is None else domain[1] for domain in domains],
        },
        schema={"metric": pl.String, "direction": pl.String, "lo": pl.Float64, "hi": pl.Float64},
    )


def goodness(value: pl.Expr, direction: pl.Expr) -> pl.Expr:
    """A [0, 1] ratio turned so that 1 is always best (``1 - value`` when lower is better)."""
    return pl.when(direction == LOWER).then(1.0 - value).otherwise(value)


def long_case_values(
    cases: pl.DataFrame, metric_columns: Mapping[str, str], catalog: Catalog = CATALOG
) -> pl.DataFrame:
    """One row per (case, metric) with a value: ``case_id``, ``metric``, ``value``,
    ``direction``, ``lo``, ``hi`` (the per-case frame unpivoted, catalog facts joined)."""
    long = cases.select(
        "case_id",
        *[
            pl.col(column).cast(pl.Float64).alias(metric)
            for metric, column in metric_columns.items()
        ],
    ).unpivot(index="case_id", variable_name="metric", value_name="value")
    facts = direction_frame(list(metric_columns), catalog)
    return long.filter(pl.col("value").is_not_null()).join(facts, on="metric", how="left")


def binned(
    values: pl.DataFrame,
    by: Sequence[str],
    *,
    value: str = "value",
    bins: int = BINS,
    shared_range: bool = False,
) -> pl.DataFrame:
    """Counts of ``value`` in equal-width bins per ``by`` group: ``*by``, ``bin_start``,
    ``bin_end``, ``cases``.

    A group's range is its ``lo``/``hi`` columns when present and set (a ratio:
    [0, 1]), else its own min and max; an integer-valued group spanning fewer
    than ``bins`` units gets one bin per integer; a flat group gets one bin
    around its value. The top edge is closed (a 1.0 lands in the last bin).
    ``shared_range`` takes the range over all groups (bins line up across
    runs). Only non-empty bins are returned: one row per bar.
    """
    keys = list(by)
    v = pl.col(value).cast(pl.Float64)
    frame = values.filter(v.is_not_null() & v.is_finite())

    def scoped(expr: pl.Expr) -> pl.Expr:
        return expr if shared_range else expr.over(keys)

    has_domain = {"lo", "hi"}.issubset(frame.columns)
    own = pl.col("lo").is_not_null() if has_domain else pl.lit(False)
    low = (
        pl.when(own).then(pl.col("lo")).otherwise(scoped(v.min()))
        if has_domain
        else scoped(v.min())
    )
    high = (
        pl.when(own).then(pl.col("hi")).otherwise(scoped(v.max()))
        if has_domain
        else scoped(v.max())
    )
    # One bin per integer only for a small integer range of the data's own (a
    # ratio's [0, 1] keeps its ten bins even when every value is 0 or 1).
    integral = ~own & (scoped((v - v.round()).abs().max()) == 0) & ((high - low) < bins)
    frame = frame.with_columns(low.alias("_lo"), high.alias("_hi"), integral.alias("_int"))
    width = (
        pl.when(pl.col("_int"))
        .then(pl.lit(1.0))
        .when(pl.col("_hi") > pl.col("_lo"))
        .then((pl.col("_hi") - pl.col("_lo")) / bins)
        .otherwise(pl.lit(1.0))
    )
    start = pl.when(pl.col("_int")).then(pl.col("_lo") - 0.5).otherwise(pl.col("_lo"))
    flat = ~pl.col("_int") & (pl.col("_hi") <= pl.col("_lo"))
    start = pl.when(flat).then(pl.col("_lo") - 0.5).otherwise(start)
    count = pl.when(pl.col("_int")).then(pl.col("_hi") - pl.col("_lo") + 1).otherwise(bins)
    index = ((v - start) / width).floor().clip(0, count - 1).cast(pl.Int64)
    return (
        frame.with_columns(width.alias("_w"), start.alias("_s"), index.alias("_bin"))
        .group_by([*keys, "_bin"], maintain_order=True)
        .agg(
            (pl.col("_s").first() + pl.col("_bin").first() * pl.col("_w").first()).alias(
                "bin_start"
            ),
            pl.len().cast(pl.Int64).alias("cases"),
            pl.col("_w").first().alias("_width"),
        )
        .with_columns((pl.col("bin_start") + pl.col("_width")).alias("bin_end"))
        .sort([*keys, "bin_start"], maintain_order=True)
        .select(*keys, "bin_start", "bin_end", "cases")
    )


def case_distributions(
    cases: pl.DataFrame,
    metric_columns: Mapping[str, str],
    *,
    bins: int = BINS,
    catalog: Catalog = CATALOG,
) -> pl.DataFrame:
    """Each per-case metric's histogram: ``metric``, ``direction``, ``bin_start``,
    ``bin_end``, ``cases`` (at most ``bins`` rows per metric)."""
    long = long_case_values(cases, metric_columns, catalog)
    return binned(long, ["metric", "direction"], bins=bins)


def case_scores(
    cases: pl.DataFrame, metric_columns: Mapping[str, str], catalog: Catalog = CATALOG
) -> pl.DataFrame:
    """``case_id``, ``score``: each case's mean goodness over ``metric_columns``
    (ratios; 1 = best), worst first, ties by case_id; cases with no value left out."""
    long = long_case_values(cases, metric_columns, catalog)
    return (
        long.group_by("case_id")
        .agg(goodness(pl.col("value"), pl.col("direction")).mean().alias("score"))
        .sort(["score", "case_id"])
    )


def worst_cases(
    cases: pl.DataFrame,
    metric_columns: Mapping[str, str],
    *,
    n: int = WORST_CASES,
    catalog: Catalog = CATALOG,
) -> pl.DataFrame:
    """The ``n`` cases that did worst on ``metric_columns`` (ratios), as one row per
    (case, metric): ``case_id``, ``rank`` (0 = worst), ``metric``, ``value``,
    ``goodness`` (1 = best whatever the direction), ``score`` (the case's mean
    goodness, what the cases are ranked by; ties by case_id)."""
    long = long_case_values(cases, metric_columns, catalog).with_columns(
        goodness(pl.col("value"), pl.col("direction")).alias("goodness")
    )
    ranked = case_scores(cases, metric_columns, catalog).head(n).with_row_index("rank")
    return (
        ranked.join(long, on="case_id", how="inner")
        .sort(["rank", "metric"])
        .select(
            "case_id",
            pl.col("rank").cast(pl.Int64),
            "metric",
            "value",
            "goodness",
            "score",
        )
    )


def run_distributions(case_values: pl.DataFrame, metric: str, *, bins: int = BINS) -> pl.DataFrame:
    """One per-case metric's histogram in every run: ``run``, ``run_order``, ``label``,
    ``bin_start``, ``bin_end``, ``cases``, ``share`` (of that run's cases with a value).

    ``case_values``: ``run``, ``run_order``, ``label``?, ``case_id``, ``value``
    (:func:`taguru_eval.analyst.drift.case_metric_long`)."""
    domain = domain_of(metric)
    frame = case_values.with_columns(
        pl.lit(None if domain is None else domain[0], dtype=pl.Float64).alias("lo"),
        pl.lit(None if domain is None else domain[1], dtype=pl.Float64).alias("hi"),
    )
    if "label" not in frame.columns:
        frame = frame.with_columns(pl.col("run").alias("label"))
    counted = binned(frame, ["run", "run_order", "label"], bins=bins, shared_range=True)
    return counted.with_columns(
        (pl.col("cases") / pl.col("cases").sum().over("run")).alias("share")
    ).sort(["run_order", "bin_start"])


def worst_cases_over_runs(
    case_values: pl.DataFrame, metric: str, *, n: int = 20, catalog: Catalog = CATALOG
) -> pl.DataFrame:
    """The ``n`` cases worst on ``metric`` in the newest run, with their value in every run.

    Worst = lowest goodness in the newest run; ties go to the case that lost
    most since its first run, then to case_id. Columns: ``case_id``, ``rank``,
    ``run``, ``run_order``, ``label``, ``value``, ``goodness``.
    """
    direction = direction_of(metric, catalog)
    frame = case_values.filter(pl.col("value").is_not_null()).with_columns(
        goodness(pl.col("value"), pl.lit(direction)).alias("goodness")
    )
    if "label" not in frame.columns:
        frame = frame.with_columns(pl.col("run").alias("label"))
    if frame.height == 0:
        return frame.select(
            "case_id", "run", "run_order", "label", "value", "goodness"
        ).with_columns(pl.lit(0, dtype=pl.Int64).alias("rank"))
    newest = frame.get_column("run_order").max()
    per_case = (
        frame.sort("run_order")
        .group_by("case_id")
        .agg(
            pl.col("goodness").filter(pl.col("run_order") == newest).first().alias("latest"),
            (pl.col("goodness").last() - pl.col("goodness").first()).alias("change"),
        )
    )
    chosen = (
        per_case.filter(pl.col("latest").is_not_null())
        .sort(["latest", "change", "case_id"])
        .head(n)
        .with_row_index("rank")
        .select("case_id", pl.col("rank").cast(pl.Int64))
    )
    return (
        chosen.join(frame, on="case_id", how="inner")
        .sort(["rank", "run_order"])
        .select("case_id", "rank", "run", "run_order", "label", "value", "goodness")
    )


def latency_summary(samples: pl.DataFrame) -> pl.DataFrame:
    """Per lane: ``lane``, ``n``, ``min``, ``p50``, ``p90``, ``p99``, ``max``, ``mean``
    (nearest-rank percentiles, :mod:`taguru_eval.score.stats`); one row per lane."""
    if samples.height == 0:
        schema = {"lane": pl.String, "n": pl.Int64}
        schema |= dict.fromkeys(("min", "p50", "p90", "p99", "max", "mean"), pl.Float64)
        return pl.DataFrame(schema=schema)
    stats = distribution_frame(samples, "latency_ms", ["lane"])
    return stats.select("lane", "n", "min", "p50", "p90", "p99", "max", "mean").sort("lane")


def axis_domain(
    values: Sequence[float | None], metric: str, *, also: Sequence[float] = ()
) -> tuple[float, float]:
    """The y range a drift panel shows: the metric's own domain where it has one
    ([0, 1] for a ratio); otherwise the values (and ``also``, e.g. gate bounds)
    padded by a tenth of their spread — and by a tenth of the value (at least
    1) when they are all equal, so a flat series sits mid-axis between ticks
    instead of on a rounded end tick. Never below 0 for values that are not."""
    own = domain_of(metric)
    if own is not None:
        return own
    present = [float(v) for v in (*values, *also) if v is not None]
    if not present:
        return (0.0, 1.0)
    low, high = min(present), max(present)
    pad = (high - low) * 0.1 if high > low else max(abs(low) * 0.1, 1.0)
    floor = low - pad
    if low >= 0 > floor:
        floor = 0.0
    return (floor, high + pad)


FAILURE_CHECKS: Final[tuple[tuple[str, tuple[str, ...], str], ...]] = (
    ("recall@k<1", ("recall_at_k",), "lt1"),
    ("mrr<1", ("mrr",), "lt1"),
    ("citations<1", ("citations_recall", "citations_locator_validity"), "lt1"),
    ("coverage<1", ("coverage_concepts", "coverage_labels", "coverage_associations"), "lt1"),
    ("answers=0", ("answers_found",), "zero"),
)
"""A case's failure signature: the name of each check that fails, from its ``cases``
columns (any of them; a null value — the case did not declare it — never fails)."""

LANE_OK: Final = frozenset({"passage: searched", "evidence: assembled"})
"""Lane outcomes that are no failure of their own."""

SIGNATURE_EXAMPLES: Final = 3


def failing_checks(columns: Sequence[str]) -> pl.Expr:
    """``fails``: the :data:`FAILURE_CHECKS` a case fails, for a frame with ``columns``
    (a check whose columns the run does not have — no ``--answers`` — is left out)."""
    names = set(columns)
    flags = []
    for name, check_columns, kind in FAILURE_CHECKS:
        present = [column for column in check_columns if column in names]
        if not present:
            continue
        failed = [pl.col(c) == 0 if kind == "zero" else pl.col(c) < 1 for c in present]
        flags.append(pl.when(pl.any_horizontal(failed)).then(pl.lit(name)))
    if not flags:
        return pl.lit([], dtype=pl.List(pl.String)).alias("fails")
    return pl.concat_list(flags).list.drop_nulls().alias("fails")


def lane_outcome(cases: pl.DataFrame, lanes: pl.DataFrame | None = None) -> pl.DataFrame:
    """``case_index``, ``lane``: the evidence lane's outcome where the case ran one
    (``evidence: assembled``), else the passage lane's (``passage: searched``)."""
    frame = cases.select("case_index", "passage_outcome")
    if lanes is not None and "evidence_outcome" in lanes.columns:
        frame = frame.join(
            lanes.select("case_index", "evidence_outcome"), on="case_index", how="left"
        )
    else:
        frame = frame.with_columns(pl.lit(None, dtype=pl.String).alias("evidence_outcome"))
    return frame.select(
        "case_index",
        pl.when(pl.col("evidence_outcome").is_not_null())
        .then(pl.format("evidence: {}", "evidence_outcome"))
        .otherwise(pl.format("passage: {}", pl.col("passage_outcome").fill_null("none")))
        .alias("lane"),
    )


QUESTION_CHARS: Final = 80
"""How much of a question a CI page shows beside its case id."""


def golden_questions(cases: pl.DataFrame, case_lanes: pl.DataFrame) -> dict[str, str]:
    """Case id -> question (cut at :data:`QUESTION_CHARS`) for the eval cases a
    golden CSV brought: those an answers file lists (``--answers``), whose ids
    ``import-golden`` made from row numbers. Empty for any other run: an id its
    author chose names the case well enough, and those pages stay as they were."""
    if ANSWERS_BLOCK not in cases.columns or "query" not in case_lanes.columns:
        return {}
    listed = cases.filter(pl.col(ANSWERS_BLOCK).is_not_null()).select("case_id")
    questions = case_lanes.join(listed, on="case_id", how="semi").select("case_id", "query")
    return {case_id: shorten(query) for case_id, query in questions.iter_rows() if query}


def shorten(text: str, limit: int = QUESTION_CHARS) -> str:
    """``text`` on one line, cut at ``limit`` characters with ``…``."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else f"{flat[: limit - 1]}…"


def failure_signatures(
    cases: pl.DataFrame,
    lanes: pl.DataFrame | None = None,
    scores: pl.DataFrame | None = None,
    *,
    examples: int = SIGNATURE_EXAMPLES,
) -> pl.DataFrame:
    """The failing cases grouped by signature: ``fails`` (the checks that fail, joined),
    ``lane`` (:func:`lane_outcome`), ``cases``, ``share`` (of every case), ``examples``
    (the ``examples`` worst case ids: lowest ``scores.score``, then case order), most
    cases first. A case that fails no check on a lane that did its work is in no group.
    One row per signature, so a 100,000-case run's worst cases are a dozen rows."""
    frame = cases.select("case_index", "case_id", failing_checks(cases.columns)).join(
        lane_outcome(cases, lanes), on="case_index", how="left"
    )
    ranked = (
        frame.join(scores.select("case_id", "score"), on="case_id", how="left")
        if scores is not None
        else frame.with_columns(pl.lit(None, dtype=pl.Float64).alias("score"))
    )
    failing = ranked.filter((pl.col("fails").list.len() > 0) | ~pl.col("lane").is_in(LANE_OK))
    return (
        failing.with_columns(pl.col("fails").list.join(", ").replace("", "—").alias("fails"))
        .group_by("fails", "lane")
        .agg(
            pl.len().alias("cases"),
            pl.col("case_id").sort_by("score", "case_index", nulls_last=True).head(examples),
        )
        .with_columns((pl.col("cases") / max(cases.height, 1)).alias("share"))
        .sort(["cases", "fails", "lane"], descending=[True, False, False])
        .select("fails", "lane", "cases", "share", pl.col("case_id").alias("examples"))
    )

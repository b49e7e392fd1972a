"""Two loaded runs -> the comparison: case verdicts, aggregate diffs, warnings.

GATE_AND_COMPARE.md §6.3–§6.8. Cases are matched by a full outer join on
``case_id`` in Polars; every per-metric verdict is a vectorized comparison of
``head - base`` against the absolute 1e-9 tolerance, and a case's kind is
decided quality-gate-first (any regression wins). Absent values stay null —
never 0 or NaN — so a one-sided value is visible and only warns.
"""

from __future__ import annotations

from typing import Final

import polars as pl

from taguru_eval.compare.abstention import compare_abstention
from taguru_eval.compare.load import Budget, MetricDecodeError, RunView, metric_scalar
from taguru_eval.compare.model import (
    EPSILON,
    IMPROVED,
    KINDS,
    NOT_COMPARABLE,
    REGRESSED,
    UNSTABLE,
    base_column,
    delta_column,
    direction_column,
    head_column,
)
from taguru_eval.compare.report import Comparison
from taguru_eval.compare.stability import classify_unstable

_STATISTICS: Final = frozenset({"distribution", "ratio", "count"})


def compare_views(base: RunView, head: RunView) -> Comparison:
    """Compare two loaded runs (§6.3–§6.8); a case a ``run --repeat`` side found
    unstable is ``unstable`` (:mod:`.stability`)."""
    cases, stability = classify_unstable(
        classify_cases(base.cases, head.cases), base.stability, head.stability
    )
    cases = classify_unselected(cases, base.selection is not None, head.selection is not None)
    metrics_compared = compared_metrics(base.cases)
    metrics, aggregate_warnings = aggregate_diffs(base, head)
    warnings = [
        *mismatch_warnings(base, head),
        *duplicate_warnings("BASE", base.duplicate_case_ids),
        *duplicate_warnings("HEAD", head.duplicate_case_ids),
        *one_sided_warnings(cases, metrics_compared),
        *aggregate_warnings,
    ]
    tally = dict.fromkeys(KINDS, 0)
    for kind, count in cases.group_by("kind").len().iter_rows():
        tally[kind] = count
    unstable = tally.pop(UNSTABLE, 0)
    not_run = tally.pop(NOT_COMPARABLE, 0)
    counts = {
        **tally,
        "cases_base": base.case_count,
        "cases_head": head.case_count,
    }
    if stability is not None:
        # Not among §6.9's header counts: the header carries it in its own block.
        counts[UNSTABLE] = unstable
    selection = None
    if base.selection is not None or head.selection is not None:
        # Not among §6.9's header counts either: the header's selection block has it.
        counts[NOT_COMPARABLE] = not_run
        selection = {"not_comparable": not_run, "base": base.selection, "head": head.selection}
    return Comparison(
        base,
        head,
        cases,
        metrics,
        tuple(warnings),
        counts,
        metrics_compared,
        abstention=compare_abstention(base.abstention, head.abstention),
        stability=stability,
        selection=selection,
    )


def classify_unselected(
    cases: pl.DataFrame, base_selected: bool, head_selected: bool
) -> pl.DataFrame:
    """``cases`` with every case missing from a side that ran a selection given the
    kind ``not_comparable``: that side did not run it, so it was neither removed
    from the set nor added to it, and nothing can be said of its metrics. A case
    missing from a side that ran its whole file stays ``added`` or ``removed``."""
    if not (base_selected or head_selected):
        return cases
    unrun = (~pl.col("in_head") & pl.lit(head_selected)) | (
        ~pl.col("in_base") & pl.lit(base_selected)
    )
    return cases.with_columns(
        pl.when(unrun).then(pl.lit(NOT_COMPARABLE)).otherwise(pl.col("kind")).alias("kind")
    )


def compared_metrics(cases: pl.DataFrame) -> tuple[str, ...]:
    """The metrics a side's case frame holds (every column but ``case_id``), in order."""
    return tuple(column for column in cases.columns if column != "case_id")


def classify_cases(base: pl.DataFrame, head: pl.DataFrame) -> pl.DataFrame:
    """Full outer join on ``case_id`` and the per-metric / per-case verdicts.

    Inputs are per-side frames of ``case_id`` plus one Float64 column per
    comparison metric (distinct case_ids). The result is sorted by case_id.
    """
    metrics = compared_metrics(base)
    if compared_metrics(head) != metrics:
        raise ValueError("BASE and HEAD were read for different comparison metrics")
    left = base.rename({m: base_column(m) for m in metrics}).with_columns(
        pl.lit(True).alias("in_base")
    )
    right = head.rename({m: head_column(m) for m in metrics}).with_columns(
        pl.lit(True).alias("in_head")
    )
    joined = left.join(right, on="case_id", how="full", coalesce=True).with_columns(
        pl.col("in_base").fill_null(False), pl.col("in_head").fill_null(False)
    )
    both = pl.col("in_base") & pl.col("in_head")
    per_metric: list[pl.Expr] = []
    for metric in metrics:
        b = pl.col(base_column(metric))
        h = pl.col(head_column(metric))
        delta = h - b
        direction = (
            pl.when(~both & (b.is_not_null() | h.is_not_null()))
            .then(pl.lit(NOT_COMPARABLE))
            .when(both & (delta > EPSILON))
            .then(pl.lit(IMPROVED))
            .when(both & (delta < -EPSILON))
            .then(pl.lit(REGRESSED))
            .otherwise(pl.lit(None, dtype=pl.String))
        )
        per_metric += [delta.alias(delta_column(metric)), direction.alias(direction_column(metric))]
    frame = joined.with_columns(per_metric)

    def any_direction(name: str) -> pl.Expr:
        return pl.any_horizontal(
            [(pl.col(direction_column(m)) == name).fill_null(False) for m in metrics]
        )

    kind = (
        pl.when(~pl.col("in_head"))
        .then(pl.lit("removed"))
        .when(~pl.col("in_base"))
        .then(pl.lit("added"))
        .when(any_direction(REGRESSED))
        .then(pl.lit(REGRESSED))
        .when(any_direction(IMPROVED))
        .then(pl.lit(IMPROVED))
        .otherwise(pl.lit("unchanged"))
        .alias("kind")
    )
    ordered = ["case_id", "kind", "in_base", "in_head"]
    for metric in metrics:
        ordered += [
            base_column(metric),
            head_column(metric),
            delta_column(metric),
            direction_column(metric),
        ]
    return frame.with_columns(kind).select(ordered).sort("case_id")


def one_sided_warnings(cases: pl.DataFrame, metrics: tuple[str, ...]) -> list[str]:
    """§6.4: a metric with a value on exactly one side of a matched case."""
    both = pl.col("in_base") & pl.col("in_head")
    parts = [
        cases.filter(
            both & (pl.col(base_column(metric)).is_null() != pl.col(head_column(metric)).is_null())
        ).select("case_id", pl.lit(index, dtype=pl.Int32).alias("order"))
        for index, metric in enumerate(metrics)
    ]
    found = pl.concat(parts).sort(["case_id", "order"])
    return [
        f"case '{case_id}': metric '{metrics[order]}' has a value on only one "
        "side — excluded from classification"
        for case_id, order in found.iter_rows()
    ]


def duplicate_warnings(side: str, duplicates: tuple[str, ...]) -> list[str]:
    """§6.3: one warning per repeated case_id occurrence."""
    return [
        f"{side}: duplicate case_id '{case_id}' — using the last occurrence"
        for case_id in duplicates
    ]


def side_scalar(view: RunView, side: str, name: str) -> tuple[float | None, str | None]:
    """One side's aggregate value of ``name`` and the warning it raises, if any
    (§6.6 steps 1–5). The value is decoded only through ``definitions``."""
    raw = view.metrics.get(name)
    if raw is None:
        return None, None
    statistic = view.statistics.get(name)
    if statistic is None:
        return None, (
            f"{side}: metric '{name}' has no definitions entry — skipped from the aggregate diff"
        )
    if statistic not in _STATISTICS:
        return None, f"{side}: metric '{name}': definitions names unknown statistic '{statistic}'"
    try:
        return metric_scalar(statistic, raw), None
    except MetricDecodeError as exc:
        return None, f"{side}: metric '{name}': {exc}"


def aggregate_diffs(base: RunView, head: RunView) -> tuple[pl.DataFrame, list[str]]:
    """The header ``metrics`` entries (§6.6) and the aggregate warnings."""
    names: list[str] = []
    statistics: list[str | None] = []
    base_values: list[float | None] = []
    head_values: list[float | None] = []
    deltas: list[float | None] = []
    warnings: list[str] = []
    for name in sorted(set(base.metrics) | set(head.metrics)):
        b, base_warning = side_scalar(base, "BASE", name)
        h, head_warning = side_scalar(head, "HEAD", name)
        warnings += [w for w in (base_warning, head_warning) if w is not None]
        if b is None and h is None:
            continue
        names.append(name)
        statistics.append(head.statistics.get(name, base.statistics.get(name)))
        base_values.append(b)
        head_values.append(h)
        deltas.append(None if b is None or h is None else h - b)
    frame = pl.DataFrame(
        {
            "metric": names,
            "statistic": statistics,
            "base": base_values,
            "head": head_values,
            "delta": deltas,
        },
        schema={
            "metric": pl.String(),
            "statistic": pl.String(),
            "base": pl.Float64(),
            "head": pl.Float64(),
            "delta": pl.Float64(),
        },
    )
    return frame, warnings


def mismatch_warnings(base: RunView, head: RunView) -> list[str]:
    """§6.7, in order; each check yields at most one warning."""
    warnings: list[str] = []
    if base.context != head.context:
        warnings.append(f"context differs: BASE '{base.context}' vs HEAD '{head.context}'")
    if base.revision_after != head.revision_after:
        warnings.append("corpus.revision_after differs between BASE and HEAD")
    for view in (base, head):
        if not view.stable:
            warnings.append(f"{view.path}: corpus.stable is false — a write landed mid-run")
    if base.thresholds_sha256 != head.thresholds_sha256:
        warnings.append(
            "thresholds file identity differs: "
            f"BASE {_digest_prefix(base.thresholds_sha256)} "
            f"vs HEAD {_digest_prefix(head.thresholds_sha256)}"
        )
    if base.stamp != head.stamp:
        warnings.append(f"taguru_evaluation stamp differs: BASE {base.stamp} vs HEAD {head.stamp}")
    if base.budget != head.budget:
        warnings.append(
            f"budget differs: BASE {budget_text(base.budget)} vs HEAD {budget_text(head.budget)}"
            " — not an equal-budget comparison"
        )
    return warnings


def _digest_prefix(digest: str | None) -> str:
    # Characters, not bytes: a non-ASCII digest must not be cut mid-character (§9).
    return "none" if digest is None else digest[:12]


def budget_text(budget: Budget | None) -> str:
    """One side's ``inputs.budget`` as the budget warning words it (§6.7)."""
    if budget is None:
        return "none (untruncated baseline)"
    items, size, tokens = budget
    return f"max_items={items} max_bytes={size} max_tokens={tokens}"

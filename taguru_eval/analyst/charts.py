"""Altair chart builders over Polars frames (no pandas, no I/O).

Every builder takes frames that :mod:`taguru_eval.drift` (or compare) already
produced and returns an Altair chart; none of them reads the store or the
network. Polars frames go to Altair as they are (Altair reads them through
narwhals), so the chart's data is exactly the frame's rows. Each chart carries
a ``name`` in its spec so the report and its browser test can find it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final, TypeAlias, cast

import altair as alt
import polars as pl

from taguru_eval.analyst.drift import DRIFT_METRICS
from taguru_eval.catalog import COMPARISON_METRICS
from taguru_eval.compare.model import base_column, delta_column, direction_column, head_column

ChartLike: TypeAlias = alt.TopLevelMixin
"""What every builder returns: a top-level Altair chart (``.to_dict()``, ``.to_html()``)."""

IMPROVED_COLOR: Final = "#2e7d32"
REGRESSED_COLOR: Final = "#c62828"
NEUTRAL_COLOR: Final = "#9e9e9e"
REVISION_COLOR: Final = "#ef6c00"
BOUND_COLOR: Final = "#6a1b9a"

COMPARE_KINDS: Final = ("improved", "regressed", "unchanged", "added", "removed")
"""Case outcomes of compare, in the order the compare view lists them."""

_DIRECTION_SCALE: Final = alt.Scale(
    domain=list(COMPARE_KINDS),
    range=[IMPROVED_COLOR, REGRESSED_COLOR, NEUTRAL_COLOR, "#1565c0", "#795548"],
)


def _run_axis(order: Sequence[str], title: str = "run") -> Any:
    """An ordinal x axis whose domain is the runs in time order (shared by all layers)."""
    return alt.X(
        "run:N",
        sort=list(order),
        scale=alt.Scale(domain=list(order)),
        title=title,
        axis=alt.Axis(labelAngle=-40, labelLimit=160),
    )


def _run_order(frame: pl.DataFrame) -> list[str]:
    if "run_order" in frame.columns:
        frame = frame.sort("run_order")
    return frame.get_column("run").unique(maintain_order=True).to_list()


def drift_panel(
    history: pl.DataFrame,
    metric: str,
    *,
    runs: pl.DataFrame | None = None,
    bounds: pl.DataFrame | None = None,
    order: Sequence[str] | None = None,
    width: int = 320,
    height: int = 160,
) -> alt.LayerChart:
    """One metric's scalar over runs, with corpus-revision changes and gate bounds.

    ``history``: ``run``, ``run_order``, ``metric``, ``scalar`` (drift.metric_history).
    ``runs``: run index (``run``, ``revision``, ``revision_changed``) — a dashed
    vertical rule marks each run that started from a new corpus revision.
    ``bounds``: ``metric``, ``bound``, ``threshold`` — a horizontal rule per bound.
    """
    rows = history.filter(pl.col("metric") == metric).select(
        "run", "run_order", "metric", "scalar", "n"
    )
    axis_runs = list(order) if order is not None else _run_order(history)
    x = _run_axis(axis_runs)
    line = (
        alt.Chart(rows)
        .mark_line(point=True)
        .encode(
            x=x,
            y=alt.Y("scalar:Q", title=metric, scale=alt.Scale(zero=False)),
            tooltip=["run:N", "metric:N", alt.Tooltip("scalar:Q", format=".4f"), "n:Q"],
        )
    )
    layers: list[Any] = [line]
    if runs is not None and runs.height:
        changes = runs.filter(pl.col("revision_changed")).select("run", "revision")
        layers.append(
            alt.Chart(changes)
            .mark_rule(color=REVISION_COLOR, strokeDash=[4, 3])
            .encode(x=x, tooltip=["run:N", alt.Tooltip("revision:N", title="new revision")])
        )
    if bounds is not None and bounds.height:
        own = bounds.filter(pl.col("metric") == metric)
        if own.height:
            layers.append(
                alt.Chart(own)
                .mark_rule(color=BOUND_COLOR)
                .encode(y="threshold:Q", tooltip=["metric:N", "bound:N", "threshold:Q"])
            )
    return cast(
        alt.LayerChart, alt.layer(*layers).properties(title=metric, width=width, height=height)
    )


def drift_chart(
    history: pl.DataFrame,
    *,
    metrics: Sequence[str] = DRIFT_METRICS,
    runs: pl.DataFrame | None = None,
    bounds: pl.DataFrame | None = None,
    columns: int = 2,
) -> ChartLike:
    """Small multiples of :func:`drift_panel`, one per metric, on one shared run axis."""
    order = _run_order(runs) if runs is not None and runs.height else _run_order(history)
    panels = [
        drift_panel(history, metric, runs=runs, bounds=bounds, order=order) for metric in metrics
    ]
    return cast(ChartLike, alt.concat(*panels, columns=columns).properties(name="drift"))


def case_heatmap(case_values: pl.DataFrame, metric: str) -> ChartLike:
    """One case-scoped metric: cases (rows) x runs (columns), colour = value.

    ``case_values``: ``run``, ``run_order``, ``case_id``, ``value``
    (drift.case_metric_long). A missing value (the case did not declare the
    expectation) stays an empty cell rather than a zero.
    """
    order = _run_order(case_values)
    rows = case_values.filter(pl.col("value").is_not_null())
    x = _run_axis(order)
    cells = (
        alt.Chart(rows)
        .mark_rect()
        .encode(
            x=x,
            y=alt.Y("case_id:N", title="case"),
            color=alt.Color(
                "value:Q", title=metric, scale=alt.Scale(scheme="viridis", domain=[0, 1])
            ),
            tooltip=["run:N", "case_id:N", alt.Tooltip("value:Q", format=".3f")],
        )
    )
    return cast(
        ChartLike, alt.layer(cells).properties(title=f"{metric} per case", name="case_heatmap")
    )


def case_metrics_chart(cases: pl.DataFrame, metric_columns: dict[str, str]) -> ChartLike:
    """One run's per-case metrics: cases (rows) x metrics (columns), colour = value.

    ``metric_columns`` maps metric names to ``cases`` columns
    (the catalog's per-case ratio metrics).
    """
    long = cases.select(
        "case_id",
        *[
            pl.col(column).cast(pl.Float64).alias(metric)
            for metric, column in metric_columns.items()
        ],
    ).unpivot(index="case_id", variable_name="metric", value_name="value")
    rows = long.filter(pl.col("value").is_not_null())
    chart = (
        alt.Chart(rows)
        .mark_rect()
        .encode(
            x=alt.X("metric:N", sort=list(metric_columns), title=None),
            y=alt.Y("case_id:N", title="case"),
            color=alt.Color("value:Q", scale=alt.Scale(scheme="viridis", domain=[0, 1])),
            tooltip=["case_id:N", "metric:N", alt.Tooltip("value:Q", format=".3f")],
        )
        .properties(title="per-case metrics", name="case_metrics")
    )
    return cast(ChartLike, chart)


def metrics_chart(metrics: pl.DataFrame, bounds: pl.DataFrame | None = None) -> ChartLike:
    """One run's aggregate scalars (ratio-valued metrics), with gate bounds as ticks.

    ``metrics``: ``metric``, ``scalar``, ``n`` (the run's ``metrics`` table with
    catalog.scalar_expr applied); rows with no samples are left out.
    """
    rows = metrics.filter(pl.col("scalar").is_not_null()).select("metric", "scalar", "n")
    order = rows.get_column("metric").to_list()
    bars = (
        alt.Chart(rows)
        .mark_bar(color="#1976d2")
        .encode(
            x=alt.X("scalar:Q", title="mean / value", scale=alt.Scale(domain=[0, 1])),
            y=alt.Y("metric:N", sort=order, title=None),
            tooltip=["metric:N", alt.Tooltip("scalar:Q", format=".4f"), "n:Q"],
        )
    )
    layers: list[Any] = [bars]
    if bounds is not None and bounds.height:
        shown = bounds.filter(pl.col("metric").is_in(order))
        if shown.height:
            layers.append(
                alt.Chart(shown)
                .mark_tick(color=BOUND_COLOR, thickness=3, size=18)
                .encode(
                    x="threshold:Q",
                    y=alt.Y("metric:N", sort=order),
                    tooltip=["metric:N", "bound:N", "threshold:Q"],
                )
            )
    return cast(
        ChartLike,
        alt.layer(*layers).properties(title="aggregate metrics", name="metrics", width=360),
    )


def latency_chart(samples: pl.DataFrame, *, title: str = "latency by lane") -> ChartLike:
    """Latency distribution per lane (box plot); ``samples``: ``lane``, ``latency_ms``."""
    chart = (
        alt.Chart(samples)
        .mark_boxplot(extent="min-max", size=18)
        .encode(
            x=alt.X("latency_ms:Q", title="latency (ms)"),
            y=alt.Y("lane:N", title=None),
            color=alt.Color("lane:N", legend=None),
        )
        .properties(title=title, name="latency", width=360)
    )
    return cast(ChartLike, chart)


def compare_long(cases: pl.DataFrame, metrics: Sequence[str] = COMPARISON_METRICS) -> pl.DataFrame:
    """Compare's wide per-case frame as one row per (case, metric) with a value on a side.

    Columns: ``case_id``, ``kind``, ``metric``, ``base``, ``head``, ``delta``,
    ``direction`` (improved / regressed / unchanged / added / removed).
    """
    parts = [
        cases.select(
            "case_id",
            "kind",
            pl.lit(metric).alias("metric"),
            pl.col(base_column(metric)).cast(pl.Float64).alias("base"),
            pl.col(head_column(metric)).cast(pl.Float64).alias("head"),
            pl.col(delta_column(metric)).cast(pl.Float64).alias("delta"),
            pl.col(direction_column(metric)).cast(pl.String).alias("direction"),
        )
        for metric in metrics
    ]
    long = pl.concat(parts) if parts else pl.DataFrame()
    return long.filter(pl.col("base").is_not_null() | pl.col("head").is_not_null()).with_columns(
        pl.when(pl.col("direction") == "not_comparable")
        .then(pl.col("kind"))
        .otherwise(pl.col("direction").fill_null("unchanged"))
        .alias("direction")
    )


def compare_chart(long: pl.DataFrame, counts: dict[str, int] | None = None) -> ChartLike:
    """Compare view: case counts by kind, then per-case deltas of every changed metric.

    ``long``: :func:`compare_long`'s frame. ``counts``: kind -> case count
    (Comparison.counts); derived from ``long`` when absent.
    """
    kinds = list(COMPARE_KINDS)
    if counts is None:
        per_case = long.unique("case_id").group_by("kind").len("cases")
        counts = dict(per_case.iter_rows())
    tally = pl.DataFrame(
        {"kind": kinds, "cases": [int(counts.get(kind, 0)) for kind in kinds]},
        schema={"kind": pl.String, "cases": pl.Int64},
    )
    summary = (
        alt.Chart(tally)
        .mark_bar()
        .encode(
            x=alt.X("cases:Q", title="cases"),
            y=alt.Y("kind:N", sort=kinds, title=None),
            color=alt.Color("kind:N", scale=_DIRECTION_SCALE, legend=None),
            tooltip=["kind:N", "cases:Q"],
        )
        .properties(title="cases by outcome", width=360)
    )
    changed = long.filter(pl.col("direction").is_in(["improved", "regressed"]))
    deltas = (
        alt.Chart(changed)
        .mark_bar()
        .encode(
            x=alt.X("delta:Q", title="head − base"),
            y=alt.Y("case_id:N", title=None),
            color=alt.Color("direction:N", scale=_DIRECTION_SCALE, title="direction"),
            row=alt.Row("metric:N", title=None, header=alt.Header(labelAngle=0, labelAlign="left")),
            tooltip=[
                "case_id:N",
                "metric:N",
                alt.Tooltip("base:Q", format=".4f"),
                alt.Tooltip("head:Q", format=".4f"),
                alt.Tooltip("delta:Q", format="+.4f"),
            ],
        )
        .properties(width=360)
        # Each metric lists only the cases whose value changed for it.
        .resolve_scale(y="independent")
    )
    return cast(ChartLike, alt.vconcat(summary, deltas).properties(name="compare"))

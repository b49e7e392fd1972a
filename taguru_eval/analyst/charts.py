"""Altair chart builders over Polars frames (no pandas, no I/O), bounded by construction.

Every builder takes frames that :mod:`taguru_eval.analyst.drift` (or compare)
produced and returns an Altair chart; none of them reads the store or the
network. Per-case data is aggregated in Polars first (:mod:`.aggregate`):
distributions are binned counts, per-case views show the worst N cases, drift
is one point per run and metric, latency one summary per lane — so a chart's
data has one row per mark it draws, whatever the number of cases, and never
reaches Altair's 5,000-row limit (checked here, never disabled). Colour
follows the catalog's direction (higher or lower is better); a ratio is drawn
on its own [0, 1] scale. Each chart carries a ``name`` in its spec so the
report and its browser test can find it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final, TypeAlias, cast

import altair as alt
import polars as pl

from taguru_eval.analyst import aggregate as agg
from taguru_eval.analyst.drift import DRIFT_METRICS
from taguru_eval.catalog import COMPARISON_METRICS
from taguru_eval.compare.model import base_column, delta_column, direction_column, head_column

ChartLike: TypeAlias = alt.TopLevelMixin
"""What every builder returns: a top-level Altair chart (``.to_dict()``, ``.to_html()``)."""

IMPROVED_COLOR: Final = "#2e7d32"
REGRESSED_COLOR: Final = "#c62828"
NEUTRAL_COLOR: Final = "#9e9e9e"
REVISION_COLOR: Final = "#ef6c00"
SETUP_COLOR: Final = "#00838f"
BOUND_COLOR: Final = "#6a1b9a"
HIGHER_COLOR: Final = "#1976d2"
LOWER_COLOR: Final = "#ef6c00"

COMPARE_KINDS: Final = ("improved", "regressed", "unchanged", "added", "removed")
"""Case outcomes of compare, in the order the compare view lists them."""

_DIRECTION_SCALE: Final = alt.Scale(
    domain=list(COMPARE_KINDS),
    range=[IMPROVED_COLOR, REGRESSED_COLOR, NEUTRAL_COLOR, "#1565c0", "#795548"],
)
_BETTER_SCALE: Final = alt.Scale(
    domain=[agg.HIGHER, agg.LOWER, agg.NEUTRAL], range=[HIGHER_COLOR, LOWER_COLOR, NEUTRAL_COLOR]
)
_GOODNESS_SCALE: Final = alt.Scale(scheme="viridis", domain=[0, 1])
_RATIO_FORMAT: Final = ".2f"
_VALUE_FORMAT: Final = ",.4~g"


def _data(frame: pl.DataFrame, chart: str) -> pl.DataFrame:
    """A chart's data set, checked against the row limit (the builders aggregate first)."""
    if frame.height >= agg.ROW_LIMIT:
        raise ValueError(
            f"chart {chart!r} would embed {frame.height} rows; aggregate it first "
            "(taguru_eval.analyst.aggregate)"
        )
    return frame


def _run_field(frame: pl.DataFrame) -> str:
    """Runs are shown by their readable label (time plus short id) when the frame has one."""
    return "label" if "label" in frame.columns else "run"


def _run_axis(order: Sequence[str], field: str = "label", title: str = "run") -> Any:
    """An ordinal x axis whose domain is the runs in time order (shared by all layers)."""
    return alt.X(
        f"{field}:N",
        sort=list(order),
        scale=alt.Scale(domain=list(order)),
        title=title,
        axis=alt.Axis(labelAngle=-40, labelLimit=200, labelOverlap=True),
    )


def _run_order(frame: pl.DataFrame) -> list[str]:
    if "run_order" in frame.columns:
        frame = frame.sort("run_order")
    return frame.get_column(_run_field(frame)).unique(maintain_order=True).to_list()


def _y_scale(metric: str, values: Sequence[float | None], also: Sequence[float]) -> Any:
    """The honest y scale: the metric's own domain, or padded data (see agg.axis_domain)."""
    low, high = agg.axis_domain(values, metric, also=also)
    return alt.Scale(domain=[low, high], nice=False, zero=False)


def _is_ratio(metric: str) -> bool:
    return agg.domain_of(metric) is not None


def panel_title(metric: str, values: Sequence[float | None]) -> str:
    """``recall.mrr ↑``, plus ``— flat at 0.9`` when every run has the same value."""
    present = [value for value in values if value is not None]
    title = f"{metric} {agg.arrow_of(metric)}".rstrip()
    if len(present) > 1 and max(present) == min(present):
        title += f" — flat at {present[0]:.4g}"
    return title


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

    ``history``: ``run``, ``label``?, ``run_order``, ``metric``, ``scalar``, ``n``
    (drift.metric_history): one point per run. ``runs``: run index (``run``,
    ``label``, ``revision``, ``revision_changed``, ``setup_changed``?) — a dashed
    vertical rule marks each run that started from a new corpus revision, a solid
    teal one each run whose setup (:data:`~taguru_eval.analyst.drift.SETUP_FIELDS`) differs from
    the previous run's (its metrics are not comparable). ``bounds``: ``metric``,
    ``bound``, ``threshold`` — a horizontal rule per bound. The y axis is the
    metric's own domain ([0, 1] for a ratio) or the padded data: a flat series
    is never drawn on a lone rounded tick.
    """
    field = _run_field(history)
    rows = _data(
        history.filter(pl.col("metric") == metric).select(
            "run", *(["label"] if field == "label" else []), "run_order", "metric", "scalar", "n"
        ),
        "drift",
    )
    values = rows.get_column("scalar").to_list()
    own = (
        bounds.filter(pl.col("metric") == metric)
        if bounds is not None and bounds.height
        else pl.DataFrame(schema={"metric": pl.String, "bound": pl.String, "threshold": pl.Float64})
    )
    thresholds = [float(t) for t in own.get_column("threshold").to_list()]
    axis_runs = list(order) if order is not None else _run_order(history)
    x = _run_axis(axis_runs, field)
    y_axis = alt.Axis(format=_RATIO_FORMAT if _is_ratio(metric) else _VALUE_FORMAT, tickCount=5)
    line = (
        alt.Chart(rows)
        .mark_line(point=True)
        .encode(
            x=x,
            y=alt.Y(
                "scalar:Q",
                title=metric,
                scale=_y_scale(metric, values, thresholds),
                axis=y_axis,
            ),
            tooltip=[
                f"{field}:N",
                "run:N",
                "metric:N",
                alt.Tooltip("scalar:Q", format=".4f"),
                "n:Q",
            ],
        )
    )
    layers: list[Any] = [line]
    if runs is not None and runs.height:
        run_field = _run_field(runs)
        changes = _data(
            runs.filter(pl.col("revision_changed")).select(
                "run", *(["label"] if run_field == "label" else []), "revision"
            ),
            "drift",
        )
        layers.append(
            alt.Chart(changes)
            .mark_rule(color=REVISION_COLOR, strokeDash=[4, 3])
            .encode(
                x=_run_axis(axis_runs, run_field),
                tooltip=[f"{run_field}:N", alt.Tooltip("revision:N", title="new revision")],
            )
        )
        if "setup_changed" in runs.columns:
            setups = _data(
                runs.filter(pl.col("setup_changed").list.len() > 0).select(
                    "run",
                    *(["label"] if run_field == "label" else []),
                    pl.col("setup_changed").list.join(", ").alias("changed"),
                ),
                "drift",
            )
            layers.append(
                alt.Chart(setups)
                .mark_rule(color=SETUP_COLOR, strokeWidth=2)
                .encode(
                    x=_run_axis(axis_runs, run_field),
                    tooltip=[f"{run_field}:N", alt.Tooltip("changed:N", title="changed")],
                )
            )
    if own.height:
        layers.append(
            alt.Chart(own)
            .mark_rule(color=BOUND_COLOR)
            .encode(y="threshold:Q", tooltip=["metric:N", "bound:N", "threshold:Q"])
        )
    return cast(
        alt.LayerChart,
        alt.layer(*layers).properties(
            title=panel_title(metric, values), width=width, height=height
        ),
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


def _histograms(distributions: pl.DataFrame, title: str, columns: int = 4) -> Any:
    """Binned counts per metric (``metric``, ``direction``, ``bin_*``, ``cases``)."""
    return (
        alt.Chart(_data(distributions, title))
        .mark_bar()
        .encode(
            x=alt.X("bin_start:Q", bin="binned", title="value"),
            x2="bin_end:Q",
            y=alt.Y("cases:Q", title="cases"),
            color=alt.Color("direction:N", scale=_BETTER_SCALE, title="direction"),
            tooltip=[
                "metric:N",
                alt.Tooltip("bin_start:Q", format=".3~f", title="from"),
                alt.Tooltip("bin_end:Q", format=".3~f", title="to"),
                "cases:Q",
            ],
        )
        .properties(width=150, height=90)
        .facet(facet=alt.Facet("metric:N", title=None), columns=columns, title=title)
        .resolve_scale(x="independent", y="independent")
    )


def case_metrics_chart(
    cases: pl.DataFrame,
    metric_columns: Mapping[str, str],
    *,
    worst: int = agg.WORST_CASES,
    bins: int = agg.BINS,
) -> ChartLike:
    """One run's per-case metrics: a histogram per metric, then the ``worst`` cases.

    ``metric_columns`` maps metric names to ``cases`` columns (the catalog's
    per-case ratio metrics). The worst cases (lowest mean goodness over those
    metrics) are a heat map of case × metric; colour is goodness, so 1 is best
    whichever way the metric points, and the tooltip shows the value.
    """
    distributions = agg.case_distributions(cases, metric_columns, bins=bins)
    ranked = _data(agg.worst_cases(cases, metric_columns, n=worst), "case_metrics")
    order = ranked.unique("case_id", maintain_order=True).get_column("case_id").to_list()
    heat = (
        alt.Chart(ranked)
        .mark_rect()
        .encode(
            x=alt.X("metric:N", sort=list(metric_columns), title=None),
            y=alt.Y("case_id:N", sort=order, title=None),
            color=alt.Color("goodness:Q", scale=_GOODNESS_SCALE, title="1 = best"),
            tooltip=["case_id:N", "metric:N", alt.Tooltip("value:Q", format=".3f"), "rank:Q"],
        )
        .properties(title=f"the {len(order)} worst of {cases.height} cases", width=360)
    )
    histograms = _histograms(distributions, f"per-case distributions ({cases.height} cases)")
    return cast(ChartLike, alt.vconcat(histograms, heat).properties(name="case_metrics"))


def case_heatmap(case_values: pl.DataFrame, metric: str, *, worst: int = 20) -> ChartLike:
    """One per-case metric across runs: its distribution per run, then the worst cases.

    ``case_values``: ``run``, ``label``?, ``run_order``, ``case_id``, ``value``
    (drift.case_metric_long). The first view is one column per run, one cell
    per value bin, colour = share of the run's cases; the second the ``worst``
    cases of the newest run with their value in every run. A missing value
    (the case did not declare the expectation) stays an empty cell, never a 0.
    """
    labelled = (
        case_values
        if "label" in case_values.columns
        else case_values.with_columns(pl.col("run").alias("label"))
    )
    order = _run_order(labelled)
    strips = _data(agg.run_distributions(labelled, metric), "case_heatmap")
    worst_rows = _data(agg.worst_cases_over_runs(labelled, metric, n=worst), "case_heatmap")
    x = _run_axis(order, "label")
    distribution = (
        alt.Chart(strips)
        .mark_rect()
        .encode(
            x=x,
            y=alt.Y("bin_start:O", sort="descending", title=f"{metric} (bin start)"),
            color=alt.Color("share:Q", title="share of cases", scale=alt.Scale(scheme="blues")),
            tooltip=[
                "label:N",
                alt.Tooltip("bin_start:Q", format=".3~f", title="from"),
                alt.Tooltip("bin_end:Q", format=".3~f", title="to"),
                "cases:Q",
                alt.Tooltip("share:Q", format=".1%"),
            ],
        )
        .properties(title=f"{metric}: distribution per run")
    )
    cases_order = worst_rows.unique("case_id", maintain_order=True).get_column("case_id").to_list()
    cells = (
        alt.Chart(worst_rows)
        .mark_rect()
        .encode(
            x=x,
            y=alt.Y("case_id:N", sort=cases_order, title=None),
            color=alt.Color("goodness:Q", scale=_GOODNESS_SCALE, title="1 = best"),
            tooltip=["label:N", "case_id:N", alt.Tooltip("value:Q", format=".3f")],
        )
        .properties(title=f"{metric}: the {len(cases_order)} worst cases of the newest run")
    )
    return cast(ChartLike, alt.vconcat(distribution, cells).properties(name="case_heatmap"))


def metrics_chart(metrics: pl.DataFrame, bounds: pl.DataFrame | None = None) -> ChartLike:
    """One run's aggregate scalars (ratio-valued metrics), with gate bounds as ticks.

    ``metrics``: ``metric``, ``scalar``, ``n`` (the run's ``metrics`` table with
    catalog.scalar_expr applied); rows with no samples are left out. Bars are
    coloured by the metric's direction, so a low share that is good (a failure
    rate) does not look like a low share that is bad.
    """
    rows = metrics.filter(pl.col("scalar").is_not_null()).select("metric", "scalar", "n")
    order = rows.get_column("metric").to_list()
    rows = _data(
        rows.join(agg.direction_frame(order).select("metric", "direction"), on="metric"),
        "metrics",
    )
    bars = (
        alt.Chart(rows)
        .mark_bar()
        .encode(
            x=alt.X(
                "scalar:Q",
                title="mean / value",
                scale=alt.Scale(domain=[0, 1]),
                axis=alt.Axis(format=_RATIO_FORMAT),
            ),
            y=alt.Y("metric:N", sort=order, title=None),
            color=alt.Color("direction:N", scale=_BETTER_SCALE, title="direction"),
            tooltip=["metric:N", "direction:N", alt.Tooltip("scalar:Q", format=".4f"), "n:Q"],
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
    """Latency per lane from its summary: a rule min–max, a bar p50–p90, a tick at p99.

    ``samples``: ``lane``, ``latency_ms`` (every call); summarised in Polars
    (nearest-rank percentiles) so the chart holds one row per lane.
    """
    summary = _data(agg.latency_summary(samples), "latency")
    base = alt.Chart(summary).encode(y=alt.Y("lane:N", title=None))
    tooltip = ["lane:N", "n:Q", "min:Q", "p50:Q", "p90:Q", "p99:Q", "max:Q"]
    spread = base.mark_rule(color=NEUTRAL_COLOR).encode(
        x=alt.X("min:Q", title="latency (ms)"), x2="max:Q", tooltip=tooltip
    )
    middle = base.mark_bar(size=14, color=HIGHER_COLOR).encode(
        x="p50:Q", x2="p90:Q", tooltip=tooltip
    )
    tail = base.mark_tick(color=REGRESSED_COLOR, thickness=2, size=18).encode(
        x="p99:Q", tooltip=tooltip
    )
    return cast(
        ChartLike,
        alt.layer(spread, middle, tail).properties(
            title=f"{title} (bar p50–p90, red tick p99, line min–max)", name="latency", width=360
        ),
    )


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


def compare_chart(
    long: pl.DataFrame, counts: Mapping[str, int] | None = None, *, bins: int = agg.BINS
) -> ChartLike:
    """Compare view: case counts by kind, then each moved metric's histogram of deltas.

    ``long``: :func:`compare_long`'s frame. ``counts``: kind -> case count
    (Comparison.counts); derived from ``long`` when absent. Deltas are binned
    per metric and direction (improved green, regressed red), so the chart
    holds at most ``bins`` rows per metric and direction.
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
    deltas = _data(binned_deltas(changed, bins=bins), "compare")
    histograms = (
        alt.Chart(deltas)
        .mark_bar()
        .encode(
            x=alt.X("bin_start:Q", bin="binned", title="head − base"),
            x2="bin_end:Q",
            y=alt.Y("cases:Q", title="cases", stack=True),
            color=alt.Color("direction:N", scale=_DIRECTION_SCALE, title="direction"),
            tooltip=[
                "metric:N",
                "direction:N",
                alt.Tooltip("bin_start:Q", format="+.3~f", title="from"),
                alt.Tooltip("bin_end:Q", format="+.3~f", title="to"),
                "cases:Q",
            ],
        )
        .properties(width=170, height=90)
        .facet(facet=alt.Facet("metric:N", title=None), columns=3, title="per-case deltas")
        .resolve_scale(x="independent", y="independent")
    )
    return cast(ChartLike, alt.vconcat(summary, histograms).properties(name="compare"))


def binned_deltas(changed: pl.DataFrame, *, bins: int = agg.BINS) -> pl.DataFrame:
    """``metric``, ``direction``, ``bin_start``, ``bin_end``, ``cases``: each changed
    metric's deltas binned over one range per metric (both directions share it)."""
    if changed.height == 0:
        return pl.DataFrame(
            schema={
                "metric": pl.String,
                "direction": pl.String,
                "bin_start": pl.Float64,
                "bin_end": pl.Float64,
                "cases": pl.Int64,
            }
        )
    ranged = changed.with_columns(
        pl.col("delta").min().over("metric").alias("lo"),
        pl.col("delta").max().over("metric").alias("hi"),
    ).with_columns(
        # A metric whose every delta is equal gets one bin around that delta.
        pl.when(pl.col("hi") > pl.col("lo"))
        .then(pl.col("lo"))
        .otherwise(pl.col("lo") - 0.5)
        .alias("lo"),
        pl.when(pl.col("hi") > pl.col("lo"))
        .then(pl.col("hi"))
        .otherwise(pl.col("hi") + 0.5)
        .alias("hi"),
    )
    return agg.binned(ranged, ["metric", "direction"], value="delta", bins=bins)

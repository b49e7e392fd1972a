"""The analyst surface: drift frames, chart builders, the offline HTML report, ingest,
the CI reports and the TREC export.

Its public names (what the notebooks and docs/analyst.md use) are imported on first
use (PEP 562, :func:`~taguru_eval._base.lazy.lazy_names`): ``import
taguru_eval.analyst`` costs nothing, and a name costs only its own module (the
charts load altair). The modules' other names are theirs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from taguru_eval._base.lazy import by_module, lazy_names

if TYPE_CHECKING:
    from taguru_eval.analyst.aggregate import latency_summary
    from taguru_eval.analyst.charts import (
        case_heatmap,
        case_metrics_chart,
        compare_chart,
        compare_long,
        drift_chart,
        latency_chart,
        metrics_chart,
    )
    from taguru_eval.analyst.drift import (
        DRIFT_METRICS,
        bounds_frame,
        case_history,
        case_metric_columns,
        case_metric_long,
        default_store,
        lane_crosstab,
        latency_samples,
        metric_history,
        misses,
        pick_context,
        pick_pair,
        read_thresholds,
        run_index,
    )
    from taguru_eval.analyst.export import taguru_frames, trec_frames
    from taguru_eval.analyst.must_refuse import (
        run_facts,
        trade_off_chart,
        trade_off_frame,
        verdict_counts,
        verdict_rows,
    )
    from taguru_eval.analyst.offline import enable as enable_offline
    from taguru_eval.analyst.report import build_report
    from taguru_eval.analyst.slices import tag_slice_changes, tag_slices

__all__ = [
    "DRIFT_METRICS",
    "bounds_frame",
    "build_report",
    "case_heatmap",
    "case_history",
    "case_metric_columns",
    "case_metric_long",
    "case_metrics_chart",
    "compare_chart",
    "compare_long",
    "default_store",
    "drift_chart",
    "enable_offline",
    "lane_crosstab",
    "latency_chart",
    "latency_samples",
    "latency_summary",
    "metric_history",
    "metrics_chart",
    "misses",
    "pick_context",
    "pick_pair",
    "read_thresholds",
    "run_facts",
    "run_index",
    "tag_slice_changes",
    "tag_slices",
    "taguru_frames",
    "trade_off_chart",
    "trade_off_frame",
    "trec_frames",
    "verdict_counts",
    "verdict_rows",
]

__getattr__ = lazy_names(
    __name__,
    by_module(
        __name__,
        {
            "aggregate": "latency_summary",
            "charts": (
                "case_heatmap case_metrics_chart compare_chart compare_long "
                "drift_chart latency_chart metrics_chart"
            ),
            "drift": (
                "DRIFT_METRICS bounds_frame case_history case_metric_columns "
                "case_metric_long default_store lane_crosstab latency_samples "
                "metric_history misses pick_context pick_pair read_thresholds "
                "run_index"
            ),
            "export": "taguru_frames trec_frames",
            "must_refuse": (
                "run_facts trade_off_chart trade_off_frame verdict_counts verdict_rows"
            ),
            "report": "build_report",
            "slices": "tag_slice_changes tag_slices",
            "offline:enable": "enable_offline",
        },
    ),
)

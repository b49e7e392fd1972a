"""Chart builders: marks, encodings and data rows of the specs they return."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from taguru_eval.analyst import charts
from taguru_eval.catalog import COMPARISON_METRICS
from taguru_eval.compare.classify import classify_cases

ROOT = Path(__file__).resolve().parent.parent


def _rows(spec: dict[str, Any], unit: dict[str, Any]) -> list[dict[str, Any]]:
    """The data rows a unit (or layer) spec draws, resolved through ``datasets``."""
    data = unit.get("data") or spec.get("data")
    assert data is not None, "a layer without data"
    rows: list[dict[str, Any]] = spec["datasets"][data["name"]]
    return rows


def _mark(unit: dict[str, Any]) -> str:
    mark = unit["mark"]
    return mark if isinstance(mark, str) else str(mark["type"])


def _history() -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    runs = pl.DataFrame(
        {
            "run": ["r1", "r2", "r3"],
            "revision": ["1/1/0", "1/1/0", "2/3/0"],
            "revision_changed": [False, False, True],
        }
    )
    history = pl.DataFrame(
        {
            "run": ["r1", "r2", "r3", "r1", "r2", "r3"],
            "run_order": [0, 1, 2, 0, 1, 2],
            "metric": ["recall.mrr"] * 3 + ["citations.recall"] * 3,
            "scalar": [0.9, 0.8, 0.95, 1.0, None, 0.5],
            "n": [4, 4, 4, 2, 0, 2],
        }
    )
    bounds = pl.DataFrame(
        {"metric": ["recall.mrr", "recall.mrr"], "bound": ["min", "max"], "threshold": [0.85, 1.0]}
    )
    return history, runs, bounds


def test_drift_panel_draws_values_revision_changes_and_bounds() -> None:
    history, runs, bounds = _history()
    spec = charts.drift_panel(history, "recall.mrr", runs=runs, bounds=bounds).to_dict()
    line, revisions, bound_rules = spec["layer"]
    assert _mark(line) == "line"
    assert line["mark"]["point"] is True
    assert line["encoding"]["x"]["field"] == "run"
    assert line["encoding"]["x"]["scale"]["domain"] == ["r1", "r2", "r3"]
    assert line["encoding"]["y"]["field"] == "scalar"
    assert [(r["run"], r["scalar"]) for r in _rows(spec, line)] == [
        ("r1", 0.9),
        ("r2", 0.8),
        ("r3", 0.95),
    ]
    assert _mark(revisions) == "rule"
    assert revisions["encoding"]["x"]["field"] == "run"
    assert [r["run"] for r in _rows(spec, revisions)] == ["r3"]
    assert _mark(bound_rules) == "rule"
    assert bound_rules["encoding"]["y"]["field"] == "threshold"
    assert sorted(r["threshold"] for r in _rows(spec, bound_rules)) == [0.85, 1.0]


def test_drift_chart_has_one_panel_per_metric_and_no_bound_layer_without_bounds() -> None:
    history, runs, bounds = _history()
    spec = charts.drift_chart(
        history, metrics=["recall.mrr", "citations.recall"], runs=runs, bounds=bounds
    ).to_dict()
    assert spec["name"] == "drift"
    assert [panel["title"] for panel in spec["concat"]] == ["recall.mrr", "citations.recall"]
    # citations.recall has no bound in the frame: only the line and the revision rules.
    citations_panel = spec["concat"][1]
    assert [_mark(layer) for layer in citations_panel["layer"]] == ["line", "rule"]
    rows = _rows(spec, citations_panel["layer"][0])
    assert [r["scalar"] for r in rows] == [1.0, None, 0.5]


def test_case_heatmap_leaves_absent_values_out() -> None:
    frame = pl.DataFrame(
        {
            "run": ["r1", "r1", "r2", "r2"],
            "run_order": [0, 0, 1, 1],
            "case_id": ["a", "b", "a", "b"],
            "value": [1.0, None, 0.5, 0.0],
        }
    )
    spec = charts.case_heatmap(frame, "recall.recall_at_k").to_dict()
    assert spec["name"] == "case_heatmap"
    (cells,) = spec["layer"]
    assert _mark(cells) == "rect"
    encoding = cells["encoding"]
    assert (encoding["x"]["field"], encoding["y"]["field"], encoding["color"]["field"]) == (
        "run",
        "case_id",
        "value",
    )
    assert encoding["x"]["scale"]["domain"] == ["r1", "r2"]
    assert sorted((r["run"], r["case_id"], r["value"]) for r in _rows(spec, cells)) == [
        ("r1", "a", 1.0),
        ("r2", "a", 0.5),
        ("r2", "b", 0.0),
    ]


def test_latency_chart_is_a_box_plot_per_lane() -> None:
    samples = pl.DataFrame({"lane": ["passage", "passage", "resolve"], "latency_ms": [12, 30, 3]})
    spec = charts.latency_chart(samples).to_dict()
    assert spec["name"] == "latency"
    assert _mark(spec) == "boxplot"
    assert spec["encoding"]["x"]["field"] == "latency_ms"
    assert spec["encoding"]["y"]["field"] == "lane"
    assert _rows(spec, spec) == samples.to_dicts()


def test_metrics_chart_bars_and_bound_ticks() -> None:
    metrics = pl.DataFrame(
        {"metric": ["recall.mrr", "citations.recall"], "scalar": [0.75, None], "n": [4, 0]}
    )
    bounds = pl.DataFrame({"metric": ["recall.mrr"], "bound": ["min"], "threshold": [0.9]})
    spec = charts.metrics_chart(metrics, bounds).to_dict()
    bars, ticks = spec["layer"]
    assert (_mark(bars), _mark(ticks)) == ("bar", "tick")
    assert _rows(spec, bars) == [{"metric": "recall.mrr", "scalar": 0.75, "n": 4}]
    assert _rows(spec, ticks)[0]["threshold"] == 0.9


def test_case_metrics_chart_one_cell_per_present_value() -> None:
    cases = pl.DataFrame({"case_id": ["a", "b"], "mrr": [1.0, 0.5], "ndcg": [None, 0.25]})
    spec = charts.case_metrics_chart(cases, {"recall.mrr": "mrr", "recall.ndcg": "ndcg"}).to_dict()
    assert _mark(spec) == "rect"
    assert sorted((r["case_id"], r["metric"], r["value"]) for r in _rows(spec, spec)) == [
        ("a", "recall.mrr", 1.0),
        ("b", "recall.mrr", 0.5),
        ("b", "recall.ndcg", 0.25),
    ]


def _comparison_cases() -> pl.DataFrame:
    def side(values: dict[str, list[float | None]]) -> pl.DataFrame:
        columns: dict[str, Any] = {"case_id": ["a", "b", "c"]}
        for metric in COMPARISON_METRICS:
            columns[metric] = values.get(metric, [None, None, None])
        return pl.DataFrame(
            columns, schema={"case_id": pl.String, **dict.fromkeys(COMPARISON_METRICS, pl.Float64)}
        )

    base = side({"recall.mrr": [1.0, 0.5, 0.5], "recall.ndcg": [0.9, 0.9, 0.9]})
    head = side({"recall.mrr": [0.5, 1.0, 0.5], "recall.ndcg": [0.9, 0.9, 0.9]})
    return classify_cases(base, head)


def test_compare_long_and_chart_show_only_changed_metrics_as_bars() -> None:
    long = charts.compare_long(_comparison_cases())
    assert set(long.columns) == {"case_id", "kind", "metric", "base", "head", "delta", "direction"}
    mrr = long.filter(pl.col("metric") == "recall.mrr").sort("case_id")
    assert mrr.get_column("direction").to_list() == ["regressed", "improved", "unchanged"]
    assert mrr.get_column("delta").to_list() == [-0.5, 0.5, 0.0]
    # Metrics no case recorded are dropped; ndcg is present and unchanged.
    assert set(long.get_column("metric")) == {"recall.mrr", "recall.ndcg"}

    spec = charts.compare_chart(long).to_dict()
    assert spec["name"] == "compare"
    summary, deltas = spec["vconcat"]
    assert _mark(summary) == "bar"
    tally = {r["kind"]: r["cases"] for r in _rows(spec, summary)}
    assert tally == {"improved": 1, "regressed": 1, "unchanged": 1, "added": 0, "removed": 0}
    assert _mark(deltas) == "bar"
    assert deltas["encoding"]["row"]["field"] == "metric"
    assert deltas["encoding"]["x"]["field"] == "delta"
    assert sorted((r["case_id"], r["direction"]) for r in _rows(spec, deltas)) == [
        ("a", "regressed"),
        ("b", "improved"),
    ]


@pytest.mark.parametrize("builder", ["drift", "heatmap", "latency", "compare", "metrics"])
def test_builders_never_import_pandas(builder: str) -> None:
    # A fresh interpreter: another test in this process may have imported pandas.
    code = textwrap.dedent(
        f"""
        import sys
        import polars as pl
        from taguru_eval.analyst import charts
        kind = {builder!r}
        if kind == "drift":
            h = pl.DataFrame({{"run": ["a"], "run_order": [0], "metric": ["recall.mrr"],
                               "scalar": [1.0], "n": [1]}})
            chart = charts.drift_chart(h, metrics=["recall.mrr"])
        elif kind == "heatmap":
            chart = charts.case_heatmap(pl.DataFrame({{"run": ["a"], "run_order": [0],
                "case_id": ["c"], "value": [1.0]}}), "recall.mrr")
        elif kind == "latency":
            chart = charts.latency_chart(pl.DataFrame({{"lane": ["p"], "latency_ms": [1]}}))
        elif kind == "metrics":
            frame = pl.DataFrame({{"metric": ["m"], "scalar": [1.0], "n": [1]}})
            chart = charts.metrics_chart(frame)
        else:
            long = pl.DataFrame({{"case_id": ["c"], "kind": ["improved"], "metric": ["m"],
                "base": [0.0], "head": [1.0], "delta": [1.0], "direction": ["improved"]}})
            chart = charts.compare_chart(long)
        chart.to_dict()
        assert "pandas" not in sys.modules, "pandas was imported"
        print("ok")
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"

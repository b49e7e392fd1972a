"""Chart builders: marks, encodings and data rows of the specs they return."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from typing import Any

import polars as pl
import pytest
from support.paths import PROJECT_ROOT

from taguru_eval.analyst import charts
from taguru_eval.catalog import COMPARISON_METRICS
from taguru_eval.compare.classify import classify_cases

ROOT = PROJECT_ROOT


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
    assert [panel["title"] for panel in spec["concat"]] == ["recall.mrr ↑", "citations.recall ↑"]
    # citations.recall has no bound in the frame: only the line and the revision rules.
    citations_panel = spec["concat"][1]
    assert [_mark(layer) for layer in citations_panel["layer"]] == ["line", "rule"]
    rows = _rows(spec, citations_panel["layer"][0])
    assert [r["scalar"] for r in rows] == [1.0, None, 0.5]


def test_case_heatmap_bins_each_run_and_shows_the_worst_cases() -> None:
    frame = pl.DataFrame(
        {
            "run": ["r1", "r1", "r1", "r2", "r2", "r2"],
            "run_order": [0, 0, 0, 1, 1, 1],
            "case_id": ["a", "b", "c", "a", "b", "c"],
            "value": [1.0, None, 0.5, 0.5, 0.0, 1.0],
        }
    )
    spec = charts.case_heatmap(frame, "recall.recall_at_k", worst=2).to_dict()
    assert spec["name"] == "case_heatmap"
    strips, worst = spec["vconcat"]
    assert (_mark(strips), _mark(worst)) == ("rect", "rect")
    assert strips["encoding"]["x"]["scale"]["domain"] == ["r1", "r2"]
    # Per run: one row per non-empty value bin, counts over the cases with a value.
    counted = sorted((r["run"], r["bin_start"], r["cases"]) for r in _rows(spec, strips))
    assert counted == [
        ("r1", 0.5, 1),
        ("r1", 0.9, 1),
        ("r2", 0.0, 1),
        ("r2", 0.5, 1),
        ("r2", 0.9, 1),
    ]
    # The two cases worst in the newest run (b: 0.0, a: 0.5), with every run's value;
    # b's missing r1 value stays an empty cell, never a zero.
    cells = sorted((r["case_id"], r["run"], r["value"]) for r in _rows(spec, worst))
    assert cells == [("a", "r1", 1.0), ("a", "r2", 0.5), ("b", "r2", 0.0)]


def test_latency_chart_draws_one_summary_row_per_lane() -> None:
    samples = pl.DataFrame(
        {"lane": ["passage"] * 10 + ["resolve"], "latency_ms": [*range(10, 110, 10), 3]}
    )
    spec = charts.latency_chart(samples).to_dict()
    assert spec["name"] == "latency"
    spread, middle, tail = spec["layer"]
    assert (_mark(spread), _mark(middle), _mark(tail)) == ("rule", "bar", "tick")
    rows = {r["lane"]: r for r in _rows(spec, spread)}
    assert set(rows) == {"passage", "resolve"}
    # Nearest-rank percentiles, as the scorer computes them.
    assert (rows["passage"]["min"], rows["passage"]["p50"], rows["passage"]["p90"]) == (
        10.0,
        50.0,
        90.0,
    )
    assert (rows["passage"]["max"], rows["passage"]["n"]) == (100.0, 10)


def test_metrics_chart_colours_by_direction_and_ticks_bounds() -> None:
    metrics = pl.DataFrame(
        {
            "metric": ["recall.mrr", "passage.failure_rate", "citations.recall"],
            "scalar": [0.75, 0.02, None],
            "n": [4, 4, 0],
        }
    )
    bounds = pl.DataFrame({"metric": ["recall.mrr"], "bound": ["min"], "threshold": [0.9]})
    spec = charts.metrics_chart(metrics, bounds).to_dict()
    bars, ticks = spec["layer"]
    assert (_mark(bars), _mark(ticks)) == ("bar", "tick")
    assert bars["encoding"]["color"]["field"] == "direction"
    assert sorted((r["metric"], r["direction"]) for r in _rows(spec, bars)) == [
        ("passage.failure_rate", "lower is better"),
        ("recall.mrr", "higher is better"),
    ]
    colours = bars["encoding"]["color"]["scale"]
    assert colours["range"][colours["domain"].index("lower is better")] == charts.LOWER_COLOR
    assert _rows(spec, ticks)[0]["threshold"] == 0.9


def test_case_metrics_chart_histograms_and_worst_cases() -> None:
    cases = pl.DataFrame(
        {
            "case_id": ["a", "b", "c"],
            "mrr": [1.0, 0.5, 0.0],
            "ndcg": [None, 0.25, 0.0],
        }
    )
    spec = charts.case_metrics_chart(
        cases, {"recall.mrr": "mrr", "recall.ndcg": "ndcg"}, worst=2
    ).to_dict()
    histograms, worst = spec["vconcat"]
    counted = sorted((r["metric"], r["bin_start"], r["cases"]) for r in _rows(spec, histograms))
    assert counted == [
        ("recall.mrr", 0.0, 1),
        ("recall.mrr", 0.5, 1),
        ("recall.mrr", 0.9, 1),
        ("recall.ndcg", 0.0, 1),
        ("recall.ndcg", 0.2, 1),
    ]
    # c (mean 0.0) then b (mean 0.375); a value a case did not compute is no cell.
    assert [(r["case_id"], r["metric"], r["value"]) for r in _rows(spec, worst)] == [
        ("c", "recall.mrr", 0.0),
        ("c", "recall.ndcg", 0.0),
        ("b", "recall.mrr", 0.5),
        ("b", "recall.ndcg", 0.25),
    ]


def test_flat_series_gets_an_honest_axis() -> None:
    runs = [f"r{i}" for i in range(4)]
    history = pl.DataFrame(
        {
            "run": runs * 2,
            "run_order": [0, 1, 2, 3] * 2,
            "metric": ["recall.mrr"] * 4 + ["diversity.sources"] * 4,
            "scalar": [0.9] * 4 + [3.0] * 4,
            "n": [10] * 8,
        }
    )
    ratio = charts.drift_panel(history, "recall.mrr").to_dict()
    y = ratio["layer"][0]["encoding"]["y"]
    # A ratio keeps its own [0, 1] domain: 0.9 sits below the top, never on a lone "1" tick.
    assert y["scale"]["domain"] == [0.0, 1.0]
    assert y["scale"]["nice"] is False
    assert y["axis"]["format"] == ".2f"
    assert ratio["title"] == "recall.mrr ↑ — flat at 0.9"
    count = charts.drift_panel(history, "diversity.sources").to_dict()
    y = count["layer"][0]["encoding"]["y"]
    low, high = y["scale"]["domain"]
    # A metric without a domain is padded around its value, which sits mid-axis.
    assert low < 3.0 < high
    assert abs((3.0 - low) - (high - 3.0)) < 1e-9
    assert y["scale"]["nice"] is False and y["scale"]["zero"] is False
    assert count["title"] == "diversity.sources ↑ — flat at 3"


def test_drift_axis_includes_the_bounds_and_labels_runs_readably() -> None:
    history = pl.DataFrame(
        {
            "run": ["20260701T090000.000000Z-ac7236", "20260701T150000.000000Z-ef134f"],
            "label": ["2026-07-01 09:00 · ac7236", "2026-07-01 15:00 · ef134f"],
            "run_order": [0, 1],
            "metric": ["latency.passage_ms"] * 2,
            "scalar": [40.0, 50.0],
            "n": [5, 5],
        }
    )
    bounds = pl.DataFrame({"metric": ["latency.passage_ms"], "bound": ["max"], "threshold": [80.0]})
    spec = charts.drift_panel(history, "latency.passage_ms", bounds=bounds).to_dict()
    line = spec["layer"][0]
    assert line["encoding"]["x"]["field"] == "label"
    assert line["encoding"]["x"]["scale"]["domain"] == [
        "2026-07-01 09:00 · ac7236",
        "2026-07-01 15:00 · ef134f",
    ]
    low, high = line["encoding"]["y"]["scale"]["domain"]
    assert low < 40.0 and high > 80.0
    assert spec["title"] == "latency.passage_ms ↓"


def test_no_chart_embeds_more_rows_than_it_draws_at_100000_cases() -> None:
    size = 100_000
    ids = [f"case-{i:06d}" for i in range(size)]
    cases = pl.DataFrame(
        {
            "case_id": ids,
            "mrr": [(i % 7) / 6 for i in range(size)],
            "ndcg": [(i % 11) / 10 for i in range(size)],
        }
    )
    spec = charts.case_metrics_chart(cases, {"recall.mrr": "mrr", "recall.ndcg": "ndcg"}).to_dict()
    assert sum(len(rows) for rows in spec["datasets"].values()) <= 2 * 10 + 2 * 25
    samples = pl.DataFrame({"lane": ["passage"] * size, "latency_ms": list(range(size))})
    spec = charts.latency_chart(samples).to_dict()
    assert sum(len(rows) for rows in spec["datasets"].values()) == 1
    values = pl.DataFrame(
        {
            "run": ["r1"] * size + ["r2"] * size,
            "run_order": [0] * size + [1] * size,
            "case_id": ids * 2,
            "value": [(i % 5) / 4 for i in range(2 * size)],
        }
    )
    spec = charts.case_heatmap(values, "recall.mrr").to_dict()
    assert sum(len(rows) for rows in spec["datasets"].values()) <= 2 * 10 + 2 * 20
    with pytest.raises(ValueError, match="aggregate it first"):
        charts.drift_panel(
            pl.DataFrame(
                {
                    "run": ids,
                    "run_order": list(range(size)),
                    "metric": ["recall.mrr"] * size,
                    "scalar": [0.5] * size,
                    "n": [1] * size,
                }
            ),
            "recall.mrr",
        )


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


def test_compare_long_and_chart_bin_the_changed_deltas() -> None:
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
    assert _mark(deltas["spec"]) == "bar"
    assert deltas["facet"]["field"] == "metric"
    binned = sorted(
        (r["metric"], r["direction"], r["bin_start"], r["cases"]) for r in _rows(spec, deltas)
    )
    assert binned == [
        ("recall.mrr", "improved", 0.4, 1),
        ("recall.mrr", "regressed", -0.5, 1),
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

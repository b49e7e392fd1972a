"""The compare reader's view: moved metrics, per-case driver metrics, driver groups."""

from __future__ import annotations

from typing import Any

import polars as pl
from support.documents import history_documents

from taguru_eval.catalog import COMPARISON_METRICS
from taguru_eval.compare import compare
from taguru_eval.compare.classify import classify_cases
from taguru_eval.compare.drivers import case_drivers, driver_groups, moved_metrics

IDS = ["c1", "c2", "c3", "c4", "c5", "c6", "c7", "c8", "c9"]


def _side(values: dict[str, list[float | None]]) -> pl.DataFrame:
    columns: dict[str, Any] = {"case_id": IDS}
    for metric in COMPARISON_METRICS:
        columns[metric] = values.get(metric, [None] * len(IDS))
    return pl.DataFrame(
        columns, schema={"case_id": pl.String, **dict.fromkeys(COMPARISON_METRICS, pl.Float64)}
    )


def _pair() -> pl.DataFrame:
    """c1–c6 regress on diversity.sources only (c1–c5 while recall@k improved);
    c7 regresses on recall@k and mrr; c8 improves on mrr; c9 is unchanged."""
    base = _side(
        {
            "diversity.sources": [5, 5, 5, 5, 5, 5, 4, 4, 4],
            "recall.recall_at_k": [0.5, 0.5, 0.5, 0.5, 0.5, 1.0, 1.0, 1.0, 1.0],
            "recall.mrr": [1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 0.5, 1.0],
        }
    )
    head = _side(
        {
            "diversity.sources": [2, 2, 2, 2, 2, 3, 4, 4, 4],
            "recall.recall_at_k": [1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 0.5, 1.0, 1.0],
            "recall.mrr": [1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 0.5, 1.0, 1.0],
        }
    )
    return classify_cases(base, head)


def test_driver_metrics_of_a_pair_where_only_diversity_regressed() -> None:
    cases = _pair()
    drivers = case_drivers(cases, COMPARISON_METRICS)
    assert drivers.get_column("case_id").to_list() == [f"c{i}" for i in range(1, 9)]
    rows = {row["case_id"]: row for row in drivers.iter_rows(named=True)}
    assert rows["c1"]["kind"] == "regressed"
    assert rows["c1"]["drivers"] == ["diversity.sources"]
    assert rows["c1"]["driver_deltas"] == [-3.0]
    assert rows["c1"]["against"] == ["recall.recall_at_k"]
    assert rows["c1"]["against_deltas"] == [0.5]
    assert (rows["c6"]["drivers"], rows["c6"]["against"]) == (["diversity.sources"], [])
    assert rows["c7"]["drivers"] == ["recall.recall_at_k", "recall.mrr"]
    assert (rows["c8"]["kind"], rows["c8"]["drivers"]) == ("improved", ["recall.mrr"])


def test_driver_groups_make_diversity_only_one_line() -> None:
    groups = driver_groups(case_drivers(_pair(), COMPARISON_METRICS), examples=3)
    assert groups.select("kind", "drivers", "cases", "improved_elsewhere", "against").rows() == [
        ("regressed", "diversity.sources", 6, 5, "recall.recall_at_k (5)"),
        ("regressed", "recall.recall_at_k + recall.mrr", 1, 0, ""),
        ("improved", "recall.mrr", 1, 0, ""),
    ]
    assert groups.get_column("examples").to_list()[0] == ["c1", "c2", "c3"]


def test_moved_metrics_keep_only_what_moved_judged_by_direction() -> None:
    metrics = pl.DataFrame(
        {
            "metric": ["recall.mrr", "latency.passage_ms", "recall.ndcg", "structural.case_rate"],
            "statistic": ["distribution", "distribution", "distribution", "ratio"],
            "base": [0.8, 40.0, 0.7, 0.5],
            "head": [0.9, 50.0, 0.7 + 1e-12, 0.6],
            "delta": [0.1, 10.0, 1e-12, 0.1],
        }
    )
    tests = pl.DataFrame(
        {"tag": [None], "metric": ["recall.mrr"], "n": [30], "verdict": ["improved"]},
        schema_overrides={"tag": pl.String},
    ).with_columns(pl.lit(0.01).alias("p_adjusted"))
    moved = moved_metrics(metrics, tests=tests)
    # ndcg moved by less than 1e-9: not moved. Latency going up is worse, and no test
    # covers it: never called a regression, listed after the tested metrics.
    assert moved.select("metric", "direction", "verdict").rows() == [
        ("recall.mrr", "better", "improved"),
        ("latency.passage_ms", "worse", "not tested"),
        ("structural.case_rate", "changed", "not tested"),
    ]
    assert moved_metrics(metrics).get_column("verdict").unique().to_list() == ["not tested"]


def test_comparison_methods_match_the_frames() -> None:
    base, head = history_documents(2)
    comparison = compare(base, head)
    assert comparison.case_drivers().equals(case_drivers(comparison.cases, comparison.compared))
    regressed = comparison.case_drivers().filter(pl.col("kind") == "regressed").height
    assert regressed == comparison.counts["regressed"]
    groups = comparison.driver_groups()
    assert int(groups.get_column("cases").sum()) == (
        comparison.counts["regressed"] + comparison.counts["improved"]
    )
    assert set(comparison.moved_metrics().get_column("metric")) <= set(
        comparison.metrics.get_column("metric")
    )

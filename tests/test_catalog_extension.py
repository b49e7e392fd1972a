"""A per-case metric declared in the catalog reaches every reader and writer unaided.

The throwaway metric ``recall.precision`` is added to a copy of the catalog and
its per-case value to the ``cases`` frame (the scorer's one job); the aggregate
step, the artifact writer, both compare readers, the gate and the drift frames
must then carry it with no further code.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from support.documents import history_documents

from taguru_eval.analyst import drift
from taguru_eval.artifact import RunContext, build_artifact
from taguru_eval.artifact.read import artifact_to_lane_outputs, cases_from_artifact
from taguru_eval.catalog import CATALOG, CaseField, MetricDefinition
from taguru_eval.compare import compare
from taguru_eval.compare.load import view_from_document
from taguru_eval.compare.parquet import read_side
from taguru_eval.gate import case_metric_frame, case_values_from_cases_frame, evaluate_gate
from taguru_eval.inputs.thresholds import Thresholds, parse_thresholds
from taguru_eval.score.aggregate import Scores, aggregate
from taguru_eval.store import RunOrigin, write_run
from taguru_eval.tables import build_tables, metrics_frame

Stored = tuple[dict[str, Any], Scores, Path]
"""One stored run of the fixture: its artifact, its frames, its run directory."""

PRECISION = "recall.precision"
CATALOG_PLUS = CATALOG.with_metrics(
    {
        PRECISION: MetricDefinition(
            "ratio",
            "distribution",
            ("case",),
            "Share of a case's hits that satisfy an expected source.",
            "eval.jsonl expected_sources, POST /contexts/{name}/sources/search",
            None,
            per_case=CaseField("precision", ("recall", "precision"), block="recall_expected_total"),
            bounded_per_case=True,
            compared=True,
            higher_is_better=True,
        )
    }
)


def _scored_run(step: int, run_id: str) -> tuple[dict[str, Any], Scores]:
    """One run scored with the extended catalog: its artifact and its frames."""
    document = history_documents(step + 1)[step]
    outputs = artifact_to_lane_outputs(document)
    tables = build_tables(outputs, run_id)
    # The scorer's part: a value for every case with a recall block.
    cases = cases_from_artifact(document, run_id, CATALOG_PLUS).with_columns(
        pl.when(pl.col("recall_expected_total").is_not_null())
        .then(pl.col("recall_matched") / 10 + step)
        .alias("precision")
    )
    metrics = aggregate(cases, tables, metric_catalog=CATALOG_PLUS)
    scores = Scores(cases, metrics, metrics_frame(metrics, run_id, CATALOG_PLUS.statistics()))
    context = RunContext(
        eval_path="eval.jsonl",
        eval_name=None,
        context="demo",
        url="http://127.0.0.1:1",
        out="evaluation.json",
        generated_at=f"2026-07-2{step}T00:00:00Z",
        revision_before={"graph": 1, "passages": 1, "config": 0},
        revision_after={"graph": 1, "passages": 1, "config": 0},
        last_write_epoch_before=0,
        last_write_epoch_after=0,
        sources_count=3,
    )
    return build_artifact(context, outputs, scores, catalog=CATALOG_PLUS), scores


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> list[Stored]:
    store = tmp_path_factory.mktemp("store")
    stored = []
    for step in range(2):
        run_id = f"2026072{step}T000000.000000Z-00000{step}"
        document, scores = _scored_run(step, run_id)
        frames = {"cases": scores.cases, "metrics": scores.metrics_frame}
        text = json.dumps(document)
        path = write_run(
            store, "demo", run_id, frames, text, origin=RunOrigin("run"), catalog=CATALOG_PLUS
        )
        stored.append((document, scores, path))
    return stored


def _precisions(scores: Scores) -> list[float | None]:
    return scores.cases.get_column("precision").to_list()


def test_the_aggregate_step_and_the_definitions_carry_it(runs: list[Stored]) -> None:
    document, scores, _ = runs[0]
    values = [value for value in _precisions(scores) if value is not None]
    assert values, "the fixture must give some case a precision"
    metric = scores.metrics[PRECISION]
    assert metric["n"] == len(values)
    assert metric["mean"] == pytest.approx(sum(values) / len(values))
    assert PRECISION in document["definitions"]


def test_the_artifact_writes_it_at_its_path_after_the_block_keys(runs: list[Stored]) -> None:
    document, scores, _ = runs[0]
    blocks = document["cases"]
    for block, value in zip(blocks, _precisions(scores), strict=True):
        if value is None:
            assert "recall" not in block or "precision" not in block["recall"]
        else:
            assert list(block["recall"])[-1] == "precision"
            assert block["recall"]["precision"] == value


def test_both_compare_readers_read_it_and_classify_by_it(runs: list[Stored]) -> None:
    (base_doc, base_scores, base_dir), (_head_doc, _head_scores, head_dir) = runs
    from_json = view_from_document(base_doc, "<BASE>", catalog=CATALOG_PLUS)
    from_store = read_side(base_dir, catalog=CATALOG_PLUS)
    expected = _precisions(base_scores)
    assert from_json.cases.get_column(PRECISION).to_list() == expected
    assert from_store.cases.get_column(PRECISION).to_list() == expected
    comparison = compare(base_dir, head_dir, catalog=CATALOG_PLUS)
    assert PRECISION in comparison.compared
    improved = comparison.cases.filter(pl.col(f"{PRECISION}.direction") == "improved")
    assert improved.height == sum(value is not None for value in expected)
    # The base catalog does not know it: compare stays taguru's nine metrics.
    assert PRECISION not in compare(base_dir, head_dir).compared


def test_the_gate_bounds_it_per_case_from_frames_and_from_json(runs: list[Stored]) -> None:
    document, scores, _ = runs[0]
    parsed = parse_thresholds(
        b'{"taguru_evaluate_thresholds":1,"cases":{"default":{"recall.precision":{"min":0.15}}}}',
        "t.json",
    )
    thresholds = Thresholds(
        sha256="s", case_default=parsed.case_default, case_overrides=parsed.case_overrides
    )
    from_frames = case_values_from_cases_frame(scores.cases, CATALOG_PLUS)
    from_json = case_metric_frame(document["cases"], CATALOG_PLUS)
    assert (
        from_frames.filter(pl.col("metric") == PRECISION)
        .sort("case_id")
        .equals(from_json.filter(pl.col("metric") == PRECISION).sort("case_id"))
    )
    report = evaluate_gate(thresholds, scores.metrics_frame, from_frames, stable=True)
    low = [
        case_id
        for case_id, value in scores.cases.select("case_id", "precision").iter_rows()
        if value is not None and value < 0.15
    ]
    assert low, "the fixture must break the bound somewhere"
    assert [v.case_id for v in report.violations] == low
    assert {v.metric for v in report.violations} == {PRECISION}


def test_drift_draws_it_over_the_store(runs: list[Stored]) -> None:
    store = runs[0][2].parent.parent
    cases = drift.case_history(store, "demo")
    long = drift.case_metric_long(cases, PRECISION, CATALOG_PLUS)
    assert long.drop_nulls("value").height == sum(
        value is not None for _, scores, _ in runs for value in _precisions(scores)
    )
    history = drift.metric_history(store, "demo").filter(pl.col("metric") == PRECISION)
    assert history.height == 2
    assert history.get_column("scalar").to_list() == [
        scores.metrics[PRECISION]["mean"] for _, scores, _ in runs
    ]

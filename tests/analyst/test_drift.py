"""drift: the analyst frames the charts and notebooks are fed from the run store."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
from support.documents import history_documents, write_document

from taguru_eval import __version__
from taguru_eval.analyst import drift, ingest
from taguru_eval.errors import InputError


@pytest.fixture
def history_store(tmp_path: Path) -> Path:
    runs = tmp_path / "runs"
    for index, document in enumerate(history_documents(3)):
        ingest.ingest(write_document(tmp_path / f"e{index}.json", document), runs)
    return runs


def test_run_index_orders_runs_and_flags_revision_changes(history_store: Path) -> None:
    runs = drift.run_index(history_store, "demo")
    assert runs.schema == drift.RUN_INDEX_SCHEMA
    assert runs.get_column("generated_at").to_list() == [
        "2026-07-28T10:00:00Z",
        "2026-07-28T10:01:00Z",
        "2026-07-28T10:02:00Z",
    ]
    assert runs.get_column("revision").to_list() == ["10/7/0", "11/7/0", "11/8/0"]
    assert runs.get_column("revision_changed").to_list() == [False, True, True]
    assert runs.get_column("cases").to_list() == [4, 4, 4]


def test_runs_in_the_same_second_are_ordered_by_revision() -> None:
    frame = pl.DataFrame(
        {
            "run": ["x-ffff", "x-0000", "x-8888"],
            "generated_at": ["2026-01-01T00:00:00Z"] * 3,
            "revision": ["12/3/0", "9/3/0", "10/3/0"],
        }
    )
    assert drift.order_runs(frame).get_column("run").to_list() == ["x-0000", "x-8888", "x-ffff"]


def test_metric_history_scalar_is_mean_or_value(history_store: Path) -> None:
    history = drift.metric_history(history_store, "demo")
    assert history.height == 3 * 31
    mrr = history.filter(pl.col("metric") == "recall.mrr").sort("run_order")
    documents = history_documents(3)
    assert mrr.get_column("scalar").to_list() == [
        d["metrics"]["recall.mrr"]["mean"] for d in documents
    ]
    rate = history.filter(pl.col("metric") == "structural.case_rate")
    assert rate.get_column("scalar").to_list() == [1.0, 1.0, 1.0]
    assert mrr.get_column("run_order").to_list() == [0, 1, 2]


def test_case_metric_long_rejects_an_aggregate_only_metric(history_store: Path) -> None:
    cases = drift.case_history(history_store, "demo")
    long = drift.case_metric_long(cases, "citations.locator_validity")
    assert long.height == 12
    assert long.get_column("value").null_count() == 6  # two of four cases declare citations
    with pytest.raises(ValueError, match="not a per-case metric"):
        drift.case_metric_long(cases, "latency.query_ms")


def test_bounds_frame_reads_aggregate_min_and_max(tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    path.write_text(
        '{"taguru_evaluate_thresholds": 1, "aggregate": {"recall.mrr": {"min": 0.5, "max": 1},'
        ' "passage.failure_rate": {"max": 0.0}}}',
        encoding="utf-8",
    )
    bounds = drift.bounds_frame(drift.read_thresholds(path))
    assert bounds.rows() == [
        ("passage.failure_rate", "max", 0.0),
        ("recall.mrr", "min", 0.5),
        ("recall.mrr", "max", 1.0),
    ]
    assert drift.bounds_frame(None).height == 0
    assert drift.bounds_frame(None).schema == bounds.schema


def test_store_and_context_defaults(history_store: Path, tmp_path: Path) -> None:
    assert drift.default_store({"TAGURU_EVAL_STORE": "/x/y"}) == Path("/x/y")
    assert drift.pick_context(history_store, {}) == "demo"
    assert drift.pick_context(history_store, {"TAGURU_EVAL_CONTEXT": "other"}) == "other"
    with pytest.raises(InputError, match="demo --runs 5"):
        drift.pick_context(tmp_path / "empty", {})


def test_bad_thresholds_file_is_an_input_error(tmp_path: Path) -> None:
    bad = tmp_path / "t.json"
    bad.write_text("{", encoding="utf-8")
    with pytest.raises(InputError, match=r"t\.json: Expecting property name"):
        drift.read_thresholds(bad)


def test_read_thresholds_checks_override_case_ids_only_against_given_ones(tmp_path: Path) -> None:
    # A context's history has no one eval set: the overrides' case ids stand
    # unchecked there, while a run's own case ids are held against them.
    path = tmp_path / "t.json"
    path.write_text(
        '{"taguru_evaluate_thresholds": 1, "cases": {"overrides": {"zz": {}}}}', encoding="utf-8"
    )
    assert drift.read_thresholds(path).case_overrides == {"zz": {}}
    with pytest.raises(InputError, match=r"cases\.overrides: unknown case_id 'zz'"):
        drift.read_thresholds(path, ["alpha-001"])


def test_run_index_names_what_changed_between_consecutive_runs(tmp_path: Path) -> None:
    documents = history_documents(5)
    # Run 1 keeps everything; run 2 is another eval set (same name, other size);
    # run 3 another budget (and so mode); run 4 is gated by a thresholds file.
    documents[2]["inputs"]["eval"]["cases"] = 5
    documents[3]["inputs"]["eval"]["cases"] = 5
    documents[3]["inputs"]["mode"] = "assembly"
    documents[3]["inputs"]["budget"] = {"max_items": 4, "max_bytes": 4096, "max_tokens": 100}
    documents[4]["inputs"] = {**documents[3]["inputs"]}
    documents[4]["thresholds"] = {"sha256": "cd" * 32, "passed": True, "violations": []}
    runs = tmp_path / "runs"
    for index, document in enumerate(documents):
        ingest.ingest(write_document(tmp_path / f"e{index}.json", document), runs)
    index = drift.run_index(runs, "demo")
    assert index.schema == drift.RUN_INDEX_SCHEMA
    assert index.get_column("setup_changed").to_list() == [
        [],
        [],
        ["eval set"],
        ["mode", "budget"],
        ["thresholds"],
    ]
    assert index.get_column("eval_set").to_list()[1:3] == [
        "demo set (4 cases)",
        "demo set (5 cases)",
    ]
    assert index.get_column("budget")[3] == "max_items=4 max_bytes=4096 max_tokens=100"
    # A recorded digest, where there is one, is the eval set's identity.
    frame = pl.DataFrame(
        {
            "eval_set": ["a (4 cases)", "a (4 cases)", "a (4 cases)"],
            "eval_sha256": ["1" * 64, "2" * 64, "2" * 64],
            "mode": ["baseline"] * 3,
            "budget": ["none"] * 3,
            "sha256": [None, None, None],
            "server": ["127.0.0.1"] * 3,
            "provider_model": [None, None, None],
            "writer": ["taguru_eval 0.1.0"] * 3,
        },
        schema_overrides={"sha256": pl.String, "provider_model": pl.String},
    )
    changed = frame.select(drift.setup_changes()).get_column("setup_changed").to_list()
    assert changed == [[], ["eval set"], []]


def test_the_drift_marks_a_new_server_provider_or_evaluator(tmp_path: Path) -> None:
    documents = history_documents(4)
    # Another port on the same host is the same server (a CI job's `serve --port 0`).
    documents[1]["inputs"]["url"] = "http://127.0.0.1:50001"
    documents[2]["inputs"]["url"] = "http://taguru.internal:8248"
    documents[3]["inputs"]["url"] = "http://taguru.internal:8248"
    documents[3]["corpus"]["embeddings"] = {"provider_model": "bge-m3"}
    runs = tmp_path / "runs"
    for index, document in enumerate(documents):
        ingest.ingest(write_document(tmp_path / f"e{index}.json", document), runs)
    index = drift.run_index(runs, "demo")
    assert index.get_column("setup_changed").to_list() == [
        [],
        [],
        ["server"],
        ["embedding provider"],
    ]
    assert index.get_column("server").to_list()[1:3] == ["127.0.0.1", "taguru.internal"]
    # The evaluator that stored a run is run.json's writer.
    assert set(index.get_column("writer").to_list()) == {f"taguru_eval {__version__}"}
    frame = index.with_columns(
        pl.when(pl.col("run") == index.get_column("run")[1])
        .then(pl.lit("taguru_eval 9.9"))
        .otherwise(pl.col("writer"))
        .alias("writer")
    )
    changed = frame.select(drift.setup_changes()).get_column("setup_changed").to_list()
    assert changed[1:3] == [["evaluator version"], ["server", "evaluator version"]]

"""ingest: an evaluation.json (taguru's shape) into the run store, idempotently."""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path

import polars as pl
import pytest
from support.documents import evaluation_document, write_document
from support.layouts import stored_bytes
from support.paths import PROJECT_ROOT

from taguru_eval import gate, store
from taguru_eval.analyst import ingest
from taguru_eval.analyst.drift import scalar_expr
from taguru_eval.cli import ingest as ingest_cli
from taguru_eval.tables import TABLE


@pytest.fixture
def taguru_file(tmp_path: Path) -> Path:
    document = evaluation_document(step=1)
    assert "concurrency" not in document["inputs"]  # written by taguru itself
    return write_document(tmp_path / "evaluation.json", document)


def test_ingested_run_has_the_per_case_metrics_the_artifact_states(
    taguru_file: Path, tmp_path: Path
) -> None:
    result = ingest.ingest(taguru_file, tmp_path / "runs")
    assert result.created
    assert result.context == "demo"
    assert result.path == store.run_dir(tmp_path / "runs", "demo", result.run_id)
    document = json.loads(taguru_file.read_text(encoding="utf-8"))

    stored = store.read_tables(result.path)
    stated = gate.case_metric_frame(document["cases"]).sort("case_id", "metric")
    loaded = gate.case_values_from_cases_frame(stored["cases"]).sort("case_id", "metric")
    # recall x3, coverage x2, latency, diversity per case; citations x2 on two cases
    assert stated.height == 4 * 7 + 2 * 2
    assert loaded.select("case_id", "metric", "value").equals(
        stated.select("case_id", "metric", "value")
    )


def test_ingested_aggregates_and_lane_tables_match_the_artifact(
    taguru_file: Path, tmp_path: Path
) -> None:
    result = ingest.ingest(taguru_file, tmp_path / "runs")
    document = json.loads(taguru_file.read_text(encoding="utf-8"))
    stored = store.read_tables(result.path)

    metrics = stored["metrics"].with_columns(scalar_expr())
    assert metrics.height == 31
    for row in metrics.iter_rows(named=True):
        value = document["metrics"][row["metric"]]
        expected = value["mean"] if row["statistic"] == "distribution" else value["value"]
        assert row["scalar"] == expected, row["metric"]
        assert row["n"] == value["n"]

    hits = stored["hits"]
    assert hits.height == sum(len(c["passage"]["hits"]) for c in document["cases"])
    first = document["cases"][0]["passage"]["hits"][0]
    assert hits.row(0, named=True)["source"] == first["source"]
    assert stored["citation_checks"].height == 2
    # Calls implied by the shapes: passage, one cue, three positions per case; two citations.
    assert stored["calls"].height == 4 * 5 + 2
    assert stored["calls"].get_column("http_status").null_count() == 4 * 5 + 2
    assert stored["probes"].get_column("object_outcome").to_list() == ["not_found"] * 4
    # Every table has the run store's pinned schema (BI tools rely on it).
    for name, frame in stored.items():
        assert frame.schema == TABLE[name].polars, name
    # The artifact is kept verbatim (compressed) beside the tables.
    assert stored_bytes(result.path) == taguru_file.read_bytes()


def test_reingesting_the_same_file_is_a_no_op(taguru_file: Path, tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    first = ingest.ingest(taguru_file, runs)
    copy = tmp_path / "copy-of-evaluation.json"
    shutil.copyfile(taguru_file, copy)
    second = ingest.ingest(copy, runs)
    assert not second.created
    assert second.run_id == first.run_id
    assert len(list(store.context_dir(runs, "demo").iterdir())) == 1
    assert store.scan_runs(runs, "cases").collect().height == 4


def test_run_id_is_derived_from_generated_at_and_content(tmp_path: Path) -> None:
    a = write_document(tmp_path / "a.json", evaluation_document(step=0))
    b = write_document(tmp_path / "b.json", evaluation_document(step=1))
    runs = tmp_path / "runs"
    first = ingest.ingest(a, runs)
    second = ingest.ingest(b, runs)
    assert first.run_id.startswith("20260728T100512Z-")
    assert second.run_id.startswith("20260728T100512Z-")
    assert first.run_id != second.run_id  # same second, different content
    assert store.list_runs(runs).height == 2


def test_cli_imports_then_reports_already_stored(taguru_file: Path, tmp_path: Path) -> None:
    runs = str(tmp_path / "runs")
    out, err = io.StringIO(), io.StringIO()
    assert ingest_cli.main([str(taguru_file), "--store", runs], stdout=out, stderr=err) == 0
    assert "imported: context 'demo'" in out.getvalue()
    out = io.StringIO()
    assert ingest_cli.main([str(taguru_file), f"--store={runs}"], stdout=out, stderr=err) == 0
    assert "already stored" in out.getvalue()
    assert err.getvalue() == ""


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        ("{not json", "malformed evaluation.json"),
        ('{"taguru_evaluation": 99}', "99"),
    ],
)
def test_cli_rejects_a_bad_file_with_exit_2_and_one_line(
    tmp_path: Path, content: str, needle: str
) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(content, encoding="utf-8")
    err = io.StringIO()
    code = ingest_cli.main([str(bad), "--store", str(tmp_path / "runs")], stderr=err)
    assert code == 2
    message = err.getvalue()
    assert message.startswith("taguru: evaluate: ")
    assert needle in message
    assert str(bad) in message
    assert "Traceback" not in message
    assert not (tmp_path / "runs").exists()


def test_cli_usage_errors(tmp_path: Path) -> None:
    err = io.StringIO()
    assert ingest_cli.main([], stderr=err) == 2
    assert "needs an evaluation.json" in err.getvalue()
    err = io.StringIO()
    assert ingest_cli.main(["a.json", "--bogus"], stderr=err) == 2
    assert "unknown ingest flag '--bogus'" in err.getvalue()
    out = io.StringIO()
    assert ingest_cli.main(["--help"], stdout=out) == 0
    assert out.getvalue().startswith("usage: python -m taguru_eval ingest")


def test_missing_fields_default_instead_of_failing(tmp_path: Path) -> None:
    document = evaluation_document()
    for case in document["cases"]:
        case.pop("structural")
        case.pop("coverage")
        case.pop("lane_cross")
    path = write_document(tmp_path / "slim.json", document)
    result = ingest.ingest(path, tmp_path / "runs")
    cases = store.read_tables(result.path)["cases"]
    assert cases.get_column("structural_ran").to_list() == [False] * 4
    assert cases.get_column("coverage_concepts").null_count() == 4
    assert cases.select(pl.col("mrr").is_not_null().all()).item()


def test_a_case_block_without_passage_is_an_input_error(tmp_path: Path) -> None:
    document = evaluation_document()
    del document["cases"][1]["passage"]
    path = write_document(tmp_path / "broken.json", document)
    err = io.StringIO()
    assert ingest_cli.main([str(path), "--store", str(tmp_path / "runs")], stderr=err) == 2
    assert err.getvalue().startswith(f"taguru: evaluate: {path}: ")
    assert "passage" in err.getvalue()
    assert not (tmp_path / "runs").exists()


def test_our_own_run_round_trips_through_ingest(tmp_path: Path) -> None:
    from taguru_eval.demo import history

    demo_store = history.demo_history(tmp_path / "demo", 1)
    (stored_dir,) = store.context_dir(demo_store, "sake").iterdir()
    artifact = tmp_path / "demo" / "evaluation.json"
    # The run is already in its store: importing its artifact there changes nothing.
    again = ingest.ingest(artifact, demo_store)
    assert not again.created
    assert again.path == stored_dir
    # Imported into another store, it carries the per-case values the live run stored.
    fresh = ingest.ingest(artifact, tmp_path / "other")
    assert fresh.created
    live = gate.case_values_from_cases_frame(store.read_tables(stored_dir)["cases"])
    imported = gate.case_values_from_cases_frame(store.read_tables(fresh.path)["cases"])
    assert imported.height > 16
    assert imported.select("case_id", "metric", "value").equals(
        live.select("case_id", "metric", "value")
    )


def test_the_ingest_subcommand_is_wired_into_the_cli(taguru_file: Path, tmp_path: Path) -> None:
    import subprocess
    import sys

    runs = tmp_path / "runs"
    done = subprocess.run(
        [sys.executable, "-m", "taguru_eval", "ingest", str(taguru_file), "--store", str(runs)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=PROJECT_ROOT,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("  imported: context 'demo', run 20260728T100512Z-")
    assert store.list_runs(runs).height == 1

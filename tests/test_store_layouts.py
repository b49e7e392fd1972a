"""Both run-store layouts, read by every reader.

A run stored by this version keeps ``evaluation.json.zst`` and zstd Parquet
tables; a run stored before it kept an uncompressed ``evaluation.json`` and
snappy tables. The runs here are real: the sake demo evaluated against the
reference server over loopback HTTP and stored by ``taguru_eval.api.run``.
The old-layout run is that run rewritten as the previous version stored it,
in a store of its own and beside the new one in a mixed store.
"""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path

import polars as pl
import pyarrow.parquet as pq
import pytest
from support.layouts import stored_bytes, to_old_layout
from support.paths import DATA

import taguru_eval
from taguru_eval import api, store
from taguru_eval.analyst import drift, ingest, report
from taguru_eval.cli import compare as compare_cli
from taguru_eval.cli import export as export_cli
from taguru_eval.compare import compare
from taguru_eval.contract import ARTIFACT_NAME
from taguru_eval.store_artifact import (
    COMPRESSED_NAME,
    artifact_bytes,
    open_artifact,
    same_bytes,
    stored_artifact,
    stored_runs,
    write_stored,
)
from taguru_refserver.serve import running_server

EVAL = DATA / "sake" / "eval.jsonl"


def _as_old_version_stored(run_directory: Path) -> None:
    """The artifact uncompressed, the tables with pyarrow's default codec."""
    to_old_layout(run_directory)
    for table in run_directory.glob("*.parquet"):
        pq.write_table(pq.read_table(table), table)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    work = tmp_path_factory.mktemp("layouts")
    out = work / "evaluation.json"
    with running_server(DATA) as url:
        result = api.run(EVAL, "sake", url=url, out=out, store=work / "runs", env={})
    assert result.path is not None
    new = Path(result.path)
    old_store = work / "old-runs"
    old = store.run_dir(old_store, "sake", new.name.removeprefix("run="))
    shutil.copytree(new, old)
    _as_old_version_stored(old)
    # A mixed store: the old run beside the new one (another run id, same context).
    mixed = work / "mixed"
    shutil.copytree(new, store.run_dir(mixed, "sake", "20000101T000000.000000Z-000000"))
    shutil.copytree(old, store.run_dir(mixed, "sake", "19990101T000000.000000Z-000000"))
    return {"new": new, "old": old, "out": out, "old_store": old_store, "mixed": mixed}


def test_the_layouts_are_what_they_say(runs: dict[str, Path]) -> None:
    assert stored_artifact(runs["new"]).name == COMPRESSED_NAME
    assert not (runs["new"] / ARTIFACT_NAME).exists()
    assert stored_artifact(runs["old"]).name == ARTIFACT_NAME
    assert not (runs["old"] / COMPRESSED_NAME).exists()
    new_codec = pq.ParquetFile(runs["new"] / "cases.parquet").metadata.row_group(0).column(0)
    old_codec = pq.ParquetFile(runs["old"] / "cases.parquet").metadata.row_group(0).column(0)
    assert (new_codec.compression, old_codec.compression) == ("ZSTD", "SNAPPY")


def test_the_stored_document_is_the_written_evaluation_json_byte_for_byte(
    runs: dict[str, Path],
) -> None:
    written = runs["out"].read_bytes()
    assert stored_bytes(runs["new"]) == written
    assert stored_bytes(runs["old"]) == written
    assert same_bytes(stored_artifact(runs["new"]), written)
    assert not same_bytes(stored_artifact(runs["new"]), written[:-1])
    assert not same_bytes(stored_artifact(runs["new"]), written + b" ")
    with open_artifact(stored_artifact(runs["new"])) as handle:
        streamed = b"".join(iter(lambda: handle.read(1000), b""))
    assert streamed == written
    assert stored_artifact(runs["new"]).stat().st_size < len(written) / 4


def test_write_stored_takes_the_text_or_the_file(tmp_path: Path) -> None:
    text = '{"taguru_evaluation": 1, "x": "酒"}\n' * 50_000  # past one streamed chunk
    source = tmp_path / "e.json"
    source.write_text(text, encoding="utf-8")
    write_stored(tmp_path / "from-text.zst", text)
    write_stored(tmp_path / "from-file.zst", source)
    for name in ("from-text.zst", "from-file.zst"):
        assert artifact_bytes(tmp_path / name) == source.read_bytes()


@pytest.mark.parametrize("layout", ["new", "old"])
def test_load_run_reads_both_layouts(runs: dict[str, Path], layout: str) -> None:
    loaded = taguru_eval.load_run(runs[layout])
    from_file = taguru_eval.load_run(runs["out"])
    assert loaded.doc == json.loads(runs["out"].read_bytes())
    assert loaded.cases.equals(from_file.cases.with_columns(run_id=pl.lit(loaded.run_id)))
    assert loaded.tables.hits.height == from_file.tables.hits.height


@pytest.mark.parametrize("layout", ["new", "old"])
def test_compare_reads_both_layouts_through_the_tables_and_whole(
    runs: dict[str, Path], layout: str, tmp_path: Path
) -> None:
    fast = compare(runs[layout], runs["out"], base_label="B", head_label="H")
    whole = compare(stored_artifact(runs[layout]), runs["out"], base_label="B", head_label="H")
    assert fast.cases.equals(whole.cases, null_equal=True)
    assert fast.counts == whole.counts
    assert fast.base.identity() == whole.base.identity()
    across = compare(runs["old"], runs["new"])
    assert across.counts["regressed"] == across.counts["improved"] == 0
    out, err = io.StringIO(), io.StringIO()
    argv = [str(runs[layout]), str(runs["out"]), "--out", str(tmp_path / "c.jsonl")]
    assert compare_cli.main(argv, stdout=out, stderr=err) == 0, err.getvalue()


@pytest.mark.parametrize("layout", ["new", "old"])
def test_report_reads_both_layouts(runs: dict[str, Path], layout: str) -> None:
    loaded = report.load_report_run(runs[layout])
    assert loaded.directory == runs[layout]
    assert loaded.document["generated_at"] == json.loads(runs["out"].read_bytes())["generated_at"]
    assert report.load_document(runs[layout]) == json.loads(runs["out"].read_bytes())
    html = report.build_report(runs[layout])
    assert "<html" in html


@pytest.mark.parametrize("layout", ["new", "old"])
def test_ingest_reads_both_layouts_and_knows_a_stored_copy(
    runs: dict[str, Path], layout: str, tmp_path: Path
) -> None:
    target = tmp_path / "runs"
    first = ingest.ingest(runs[layout], target)
    assert first.created
    assert stored_bytes(first.path) == runs["out"].read_bytes()
    # The written file again: the copy stored above is found (compressed, read as it streams).
    assert not ingest.ingest(runs["out"], target).created
    # And a store holding it in the old layout finds it too.
    assert not ingest.ingest(runs["out"], runs["old_store"]).created


def test_scans_and_the_drift_helpers_see_both_layouts_in_one_store(runs: dict[str, Path]) -> None:
    mixed = runs["mixed"]
    listed = store.list_runs(mixed).get_column("run").to_list()
    assert listed == ["19990101T000000.000000Z-000000", "20000101T000000.000000Z-000000"]
    cases = store.scan_runs(mixed, "cases").collect()
    assert sorted(cases.get_column("run").unique().to_list()) == listed
    assert sorted(store.dataset(mixed, "cases").to_table().column("run").unique().to_pylist()) == (
        listed
    )
    index = drift.run_index(mixed, "sake")
    assert index.get_column("run").to_list() == listed
    history = drift.metric_history(mixed, "sake", index)
    assert sorted(history.get_column("run").unique().to_list()) == listed
    for directory in stored_runs(mixed, "context=*/run=*"):
        assert drift.read_run_head(directory)["generated_at"]


@pytest.mark.parametrize("layout", ["new", "old"])
def test_export_reads_both_layouts(runs: dict[str, Path], layout: str, tmp_path: Path) -> None:
    out, err = io.StringIO(), io.StringIO()
    argv = [str(runs[layout]), "--trec", str(tmp_path / "trec"), "--eval", str(EVAL)]
    assert export_cli.main(argv, stdout=out, stderr=err) == 0, err.getvalue()
    assert (tmp_path / "trec" / "run.trec").read_text("utf-8")


def test_directories_starting_with_a_dot_are_never_runs(
    runs: dict[str, Path], tmp_path: Path
) -> None:
    root = tmp_path / "runs"
    shutil.copytree(runs["new"], store.run_dir(root, "sake", "r1"))
    # A resume's checkpoints and a writer's staging: run-shaped, but not runs.
    for hidden in (".partial", ".staging"):
        shutil.copytree(runs["new"], root / hidden / "context=sake" / "run=r0")
    shutil.copytree(runs["new"], root / "context=sake" / ".run=r2")
    assert store.list_runs(root).get_column("run").to_list() == ["r1"]
    assert store.scan_runs(root, "cases").collect().get_column("run").unique().to_list() == ["r1"]
    assert drift.run_index(root, "sake").get_column("run").to_list() == ["r1"]

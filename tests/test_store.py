"""The Parquet run store: layout, atomicity, one lazy hive-partitioned scan."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import polars as pl
import pyarrow.parquet as pq
import pytest
from support.layouts import artifact_text

from taguru_eval import store
from taguru_eval.errors import RunError
from taguru_eval.store import (
    RunOrigin,
    list_runs,
    new_run_id,
    read_origin,
    read_tables,
    run_dir,
    scan_runs,
    write_run,
)
from taguru_eval.tables import build_tables, conform
from taguru_eval.tables.schemas import CALLS, CASE_LANES, METRICS


def calls_frame(run_id: str, rows: int) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "run_id": [run_id] * rows,
            "case_index": list(range(rows)),
            "case_id": [f"c{i}" for i in range(rows)],
            "seq": [0] * rows,
            "lane": ["passage"] * rows,
            "endpoint": ["POST /contexts/{name}/sources/search"] * rows,
            "item_index": [None] * rows,
            "position": [None] * rows,
            "outcome": ["searched"] * rows,
            "http_status": [200] * rows,
            "latency_ms": [5] * rows,
            "error": [None] * rows,
            "population": ["eval"] * rows,
            "repeat": [0] * rows,
        },
        schema=CALLS,
    )


def test_run_ids_sort_by_time_and_are_unique() -> None:
    now = datetime(2026, 11, 30, 4, 25, 12, 5, tzinfo=UTC)
    first = new_run_id(now)
    prefix = "20261130T042512.000005Z-"
    assert first.startswith(prefix) and len(first) == len(prefix) + 6
    # Runs within one second still sort in the order they started, whatever the suffix.
    for step in (timedelta(microseconds=1), timedelta(milliseconds=3), timedelta(seconds=1)):
        later = new_run_id(now + step)
        assert sorted([later, first]) == [first, later]
    assert new_run_id(now) != new_run_id(now)


def test_write_run_layout_and_schema(tmp_path: Path) -> None:
    run_id = new_run_id()
    frames = {"calls": calls_frame(run_id, 3), **{"metrics": pl.DataFrame(schema=METRICS)}}
    target = write_run(
        tmp_path, "sake", run_id, frames, '{"taguru_evaluation": 1}', origin=RunOrigin("run")
    )
    assert target == tmp_path / "context=sake" / f"run={run_id}"
    assert sorted(p.name for p in target.iterdir()) == [
        "calls.parquet",
        "evaluation.json.zst",
        "metrics.parquet",
        "run.json",
    ]
    assert json.loads(artifact_text(target)) == {"taguru_evaluation": 1}
    assert pq.ParquetFile(target / "calls.parquet").metadata.row_group(0).column(0).compression == (
        "ZSTD"
    )
    assert read_origin(target) == RunOrigin("run")
    tables = read_tables(target)
    assert tables["calls"].schema == CALLS
    assert tables["calls"].height == 3
    assert not (tmp_path / ".staging").exists()


def test_scan_runs_is_one_lazy_hive_scan(tmp_path: Path) -> None:
    odd_name = "日本 酒/x=1"
    ids = []
    for context, rows in (("sake", 2), ("sake", 3), (odd_name, 1)):
        run_id = new_run_id()
        ids.append(run_id)
        write_run(
            tmp_path,
            context,
            run_id,
            {"calls": calls_frame(run_id, rows)},
            "{}",
            origin=RunOrigin("run"),
        )
    lazy = scan_runs(tmp_path, "calls")
    assert isinstance(lazy, pl.LazyFrame)
    frame = lazy.collect()
    assert frame.height == 6
    assert frame.schema["context"] == pl.String and frame.schema["run"] == pl.String
    counts = dict(frame.group_by("context").len().iter_rows())
    assert counts == {"sake": 5, odd_name: 1}
    assert set(frame["run"]) == set(ids)
    assert (frame["run"] == frame["run_id"]).all()
    runs = list_runs(tmp_path)
    assert runs.height == 3
    assert set(runs["context"]) == {"sake", odd_name}


def test_scan_of_an_empty_store_has_the_table_schema(tmp_path: Path) -> None:
    frame = scan_runs(tmp_path, "calls").collect()
    assert frame.height == 0
    assert list(frame.columns) == [*CALLS.names(), "context", "run"]


def test_failed_write_leaves_no_run_and_no_staging(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = store._write_table
    calls = 0

    def flaky(path: Path, frame: pl.DataFrame, schema: object) -> None:
        nonlocal calls
        calls += 1
        if calls == 2:
            raise OSError(28, "No space left on device")
        real(path, frame, schema)  # type: ignore[arg-type]

    monkeypatch.setattr(store, "_write_table", flaky)
    run_id = new_run_id()
    frames = {"calls": calls_frame(run_id, 1), "metrics": pl.DataFrame(schema=METRICS)}
    with pytest.raises(RunError) as caught:
        write_run(tmp_path, "sake", run_id, frames, "{}", origin=RunOrigin("run"))
    assert "No space left on device" in caught.value.message
    assert not run_dir(tmp_path, "sake", run_id).exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_interrupted_write_leaves_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def interrupted(path: Path, frame: pl.DataFrame, schema: object) -> None:
        path.write_bytes(b"PAR1 partial")
        raise KeyboardInterrupt

    monkeypatch.setattr(store, "_write_table", interrupted)
    with pytest.raises(KeyboardInterrupt):
        write_run(
            tmp_path, "sake", "r1", {"calls": calls_frame("r1", 1)}, "{}", origin=RunOrigin("run")
        )
    assert list(tmp_path.iterdir()) == []
    assert scan_runs(tmp_path, "calls").collect().height == 0


def test_every_lane_table_round_trips_empty(tmp_path: Path) -> None:
    tables = build_tables([], "r0")
    target = write_run(
        tmp_path, "ctx", "r0", tables.frames(), json.dumps({}), origin=RunOrigin("run")
    )
    read = read_tables(target)
    assert set(read) == set(tables.frames())
    for name, frame in tables.frames().items():
        assert read[name].schema == frame.schema


def test_a_scan_reads_runs_stored_before_a_column_was_added(tmp_path: Path) -> None:
    older = store.run_dir(tmp_path, "ctx", "r1")
    older.mkdir(parents=True)
    old_row = conform(
        pl.DataFrame({"run_id": ["r1"], "case_index": [0], "case_id": ["a"]}), CASE_LANES
    )
    old_row.drop("tags").write_parquet(older / "case_lanes.parquet")
    (older / "evaluation.json").write_text("{}", encoding="utf-8")
    newer = conform(
        pl.DataFrame({"run_id": ["r2"], "case_index": [0], "case_id": ["b"], "tags": [["x"]]}),
        CASE_LANES,
    )
    write_run(tmp_path, "ctx", "r2", {"case_lanes": newer}, "{}", origin=RunOrigin("run"))
    scanned = scan_runs(tmp_path, "case_lanes").select("run", "case_id", "tags").sort("run")
    assert scanned.collect().rows() == [("r1", "a", None), ("r2", "b", ["x"])]

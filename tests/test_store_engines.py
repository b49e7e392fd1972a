"""The run store read by real engines: DuckDB and ``pyarrow.dataset``.

A 3-run store (two contexts, one of them named so that it must be
percent-encoded, one named like a number) is read table by table — every table
of :data:`TABLES` — with DuckDB's ``read_parquet(..., hive_partitioning =
true)`` exactly as docs/store.md documents it, and with
:func:`taguru_eval.store.dataset`; both must return the same rows as
:func:`taguru_eval.store.scan_runs`.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import duckdb
import polars as pl
import pytest
from polars.testing import assert_frame_equal
from support.documents import abstention_block, evaluation_document
from support.paths import PROJECT_ROOT

from taguru_eval.artifact import tables_from_artifact
from taguru_eval.errors import InputError
from taguru_eval.store import RunOrigin, dataset, scan_runs, table_glob, table_paths, write_run
from taguru_eval.store_artifact import COMPRESSED_NAME, artifact_bytes
from taguru_eval.tables import TABLE, TABLES

RUNS = (
    ("sake", "20260728T100000.000000Z-aaaaaa", 0),
    ("sake", "20260728T110000.000000Z-bbbbbb", 1),
    ("酒 a/b%", "20260728T120000.000000Z-cccccc", 2),
)


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("engines") / "runs"
    for context, run_id, step in RUNS:
        doc = evaluation_document(step=step, context=context)
        if step == 2:  # one run given --must-refuse and --answers, so their tables have rows
            doc["abstention"] = abstention_block()
            doc["inputs"]["answers"] = {"path": "a.jsonl", "cases": 1, "match": "normalized"}
            doc["cases"][0]["answers"] = {
                "declared": 1,
                "checks": [{"answer": "an answer", "found": True, "rank": 1}],
            }
        loaded = tables_from_artifact(doc, run_id)
        frames = {**loaded.tables.frames(), **loaded.scores.frames()}
        write_run(root, context, run_id, frames, json.dumps(doc), origin=RunOrigin("run"))
    return root


def readme_duckdb_sql() -> str:
    """The DuckDB one-liner of the run-store page (docs/store.md)."""
    readme = (PROJECT_ROOT / "docs" / "store.md").read_text("utf-8")
    match = re.search(r"```sql\n(SELECT \* FROM read_parquet\('runs/[^\n]*)\n```", readme)
    assert match, "docs/store.md: no DuckDB one-liner"
    return match.group(1)


def ordered(frame: pl.DataFrame) -> pl.DataFrame:
    keys = [name for name, dtype in frame.schema.items() if not dtype.is_nested()]
    return frame.sort(keys, nulls_last=True)


@pytest.mark.parametrize("table", [spec.name for spec in TABLES])
def test_duckdb_returns_the_rows_scan_runs_returns(store: Path, table: str) -> None:
    expected = scan_runs(store, table).collect()
    # A baseline history has no evidence candidates (those are --assembly runs).
    assert expected.height > 0 or table in (
        "attributions",
        "probes",
        "resolutions",
        "evidence_items",
    )
    sql = readme_duckdb_sql().replace("'runs/", f"'{store.as_posix()}/")
    sql = sql.replace("/cases.parquet'", f"/{table}.parquet'")
    got = duckdb.sql(sql).pl()
    assert got.columns == expected.columns
    assert_frame_equal(ordered(got.cast(dict(expected.schema))), ordered(expected))


@pytest.mark.parametrize("table", [spec.name for spec in TABLES])
def test_pyarrow_dataset_returns_the_same_rows(store: Path, table: str) -> None:
    expected = scan_runs(store, table).collect()
    got = pl.from_arrow(dataset(store, table).to_table())
    assert isinstance(got, pl.DataFrame)
    assert_frame_equal(ordered(got.select(expected.columns)), ordered(expected))


def test_partition_columns_are_decoded_strings(store: Path) -> None:
    sql = readme_duckdb_sql().replace("'runs/", f"'{store.as_posix()}/")
    contexts = duckdb.sql(f"SELECT DISTINCT context, run FROM ({sql}) ORDER BY run").fetchall()
    assert contexts == [(context, run) for context, run, _step in RUNS]
    assert sorted(dataset(store, "metrics").to_table().column("context").unique().to_pylist()) == [
        "sake",
        "酒 a/b%",
    ]


def test_a_numeric_context_stays_text_in_both_engines(tmp_path: Path) -> None:
    doc = evaluation_document(context="2024")
    loaded = tables_from_artifact(doc, "r")
    write_run(
        tmp_path,
        "2024",
        "20260728T100000.000000Z-dddddd",
        {"metrics": loaded.scores.metrics_frame},
        json.dumps(doc),
        origin=RunOrigin("run"),
    )
    sql = readme_duckdb_sql().replace("'runs/", f"'{tmp_path.as_posix()}/")
    sql = sql.replace("/cases.parquet'", "/metrics.parquet'")
    assert duckdb.sql(f"SELECT DISTINCT context FROM ({sql})").fetchall() == [("2024",)]
    assert dataset(tmp_path, "metrics").schema.field("context").type == "string"


def test_the_documented_path_list(store: Path) -> None:
    assert table_glob("hits") == "context=*/run=*/hits.parquet"
    paths = table_paths(store, "hits")
    assert len(paths) == len(RUNS)
    assert paths == sorted(paths)
    assert {path.parent.name.removeprefix("run=") for path in paths} == {
        run for _context, run, _step in RUNS
    }


def test_an_empty_store_gives_an_empty_dataset_with_the_schema(tmp_path: Path) -> None:
    empty = dataset(tmp_path, "cases")
    assert empty.to_table().num_rows == 0
    assert {"case_id", "context", "run"} <= set(empty.schema.names)
    with pytest.raises(InputError, match="no table 'nothing' in the run store"):
        dataset(tmp_path, "nothing")


def _as_stored_before(run_directory: Path) -> None:
    """Rewrite a stored run as the store wrote it before Polars' own writers:
    each table by pyarrow's Parquet writer, cast to the declared Arrow schema,
    and the artifact by pyarrow's zstd codec."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    for spec in TABLES:
        path = run_directory / spec.file_name
        if path.is_file():
            table = pl.read_parquet(path).to_arrow().select(spec.arrow.names).cast(spec.arrow)
            pq.write_table(table, path, compression="zstd")
    artifact = run_directory / COMPRESSED_NAME
    data = artifact_bytes(artifact)
    with pa.CompressedOutputStream(str(artifact), "zstd") as out:
        out.write(data)


@pytest.mark.parametrize("table", [spec.name for spec in TABLES])
def test_runs_stored_by_pyarrow_and_by_polars_read_together(tmp_path: Path, table: str) -> None:
    import pyarrow.parquet as pq

    root = tmp_path / "runs"
    written: dict[str, pl.DataFrame] = {}
    for context, run_id, step in RUNS[1:]:
        doc = evaluation_document(step=step, context=context)
        if step == 2:
            doc["abstention"] = abstention_block()
        loaded = tables_from_artifact(doc, run_id)
        frames = {**loaded.tables.frames(), **loaded.scores.frames()}
        written[run_id] = frames.get(table, TABLE[table].empty())
        directory = write_run(
            root, context, run_id, frames, json.dumps(doc), origin=RunOrigin("run")
        )
        if step == 1:
            _as_stored_before(directory)
            old = directory
        else:
            new = directory
    # The old file declares plain Arrow strings, the new one Polars' large ones.
    if (old / f"{table}.parquet").is_file() and (new / f"{table}.parquet").is_file():
        assert "large_string" not in str(pq.read_schema(old / f"{table}.parquet"))
        assert "large_string" in str(pq.read_schema(new / f"{table}.parquet"))
    # Polars reads both with the declared types and the values written.
    scanned = scan_runs(root, table).collect()
    assert {name: scanned.schema[name] for name in TABLE[table].polars} == dict(TABLE[table].polars)
    for run_id, frame in written.items():
        rows = scanned.filter(pl.col("run") == run_id).select(frame.columns)
        assert_frame_equal(rows, frame.select(TABLE[table].polars.names()), check_dtypes=False)
    # pyarrow's dataset unifies them as the declared Arrow schema.
    got = dataset(root, table)
    declared = TABLE[table].arrow
    # (Parquet names a list's item "element"; the type is the same list<string>.)
    unified = [(name, str(got.schema.field(name).type)) for name in declared.names]
    assert [(name, kind.replace("<element:", "<item:")) for name, kind in unified] == [
        (field.name, str(field.type)) for field in declared
    ]
    arrow_rows = pl.from_arrow(got.to_table())
    assert isinstance(arrow_rows, pl.DataFrame)
    assert_frame_equal(ordered(arrow_rows.select(scanned.columns)), ordered(scanned))
    # Both artifacts read back as written (pyarrow's zstd frame and python-zstandard's).
    for directory in (old, new):
        assert json.loads(artifact_bytes(directory / COMPRESSED_NAME))["taguru_evaluation"]

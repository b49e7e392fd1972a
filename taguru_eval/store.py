"""The Parquet run store: every run as columnar data, read back with one lazy scan.

Layout (hive partitioning, DESIGN.md "The tables")::

    <store>/context=<ctx>/run=<run_id>/<table>.parquet
    <store>/context=<ctx>/run=<run_id>/evaluation.json
    <store>/context=<ctx>/run=<run_id>/run.json       (how the run came to be)

``<ctx>`` is percent-encoded as one path component (Polars, DuckDB, Spark and
pyarrow decode it back), ``<run_id>`` is a UTC timestamp plus a short random
suffix, so run ids sort in time order. A run directory appears all at once: it
is written under ``<store>/.staging/`` and renamed into place, so a crash or
Ctrl-C never leaves a half-written run where :func:`scan_runs` looks.

The layout is a contract for query engines (README "The run store"): one
table's files across every run are the glob :func:`table_glob` names, with
``context`` and ``run`` as hive partition columns. Because one run directory
holds every table (and the JSON files), a directory-discovering reader such as
``pyarrow.dataset("runs", partitioning="hive")`` would mix tables; it is
given the table's file list instead (:func:`table_paths`, :func:`dataset`).
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Final, Literal
from urllib.parse import quote, unquote

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from taguru_eval._base.files import fsync_directory
from taguru_eval.catalog import CATALOG, Catalog
from taguru_eval.contract import ARTIFACT_NAME, VERSION
from taguru_eval.errors import PREFIX, RunError, os_error_text
from taguru_eval.tables.schemas import TABLE, TABLES, table_specs

if TYPE_CHECKING:
    import pyarrow.dataset as pads

DEFAULT_STORE_DIR: Final = "runs"
STAGING_DIR: Final = ".staging"
ORIGIN_NAME: Final = "run.json"
HIVE_SCHEMA: Final = {"context": pl.String, "run": pl.String}
HIVE_ARROW_SCHEMA: Final = pa.schema([pa.field(name, pa.string()) for name in HIVE_SCHEMA])
"""The partition columns, always strings (a context named ``2024`` stays text)."""


def new_run_id(now: datetime | None = None) -> str:
    """``20261130T042512.123456Z-3f9a1c``: sortable by time, unique by its suffix.

    Microseconds keep runs started within one second (a demo history, a CI
    matrix) in the order they ran; the random suffix keeps two machines apart.
    """
    moment = (now or datetime.now(UTC)).astimezone(UTC)
    return f"{moment:%Y%m%dT%H%M%S.%fZ}-{secrets.token_hex(3)}"


def context_dir(store_dir: str | Path, context: str) -> Path:
    """``<store>/context=<percent-encoded ctx>``."""
    return Path(store_dir) / f"context={quote(context, safe='')}"


def run_dir(store_dir: str | Path, context: str, run_id: str) -> Path:
    """Where run ``run_id`` of ``context`` lives (or will live)."""
    return context_dir(store_dir, context) / f"run={run_id}"


@dataclass(frozen=True)
class RunOrigin:
    """How a stored run came to be (``run.json``): made by a taguru_eval run, or
    imported by ``ingest`` from an existing evaluation.json (``source``)."""

    kind: Literal["run", "ingest"]
    writer: str = f"taguru_eval {VERSION}"
    source: str | None = None

    def to_json(self) -> dict[str, str]:
        """``run.json``'s object (``source`` only for an import)."""
        out = {"kind": self.kind, "writer": self.writer}
        if self.source is not None:
            out["source"] = self.source
        return out

    @property
    def description(self) -> str:
        """One line for a reader: who stored the run, and from what."""
        if self.kind == "ingest":
            return f"imported by {self.writer} from {self.source}"
        return f"evaluated by {self.writer}"


def write_run(
    store_dir: str | Path,
    context: str,
    run_id: str,
    frames: Mapping[str, pl.DataFrame],
    artifact: str | Path,
    *,
    origin: RunOrigin,
    catalog: Catalog = CATALOG,
) -> Path:
    """Write one run's tables, its evaluation.json and its origin; returns the
    run directory.

    ``artifact`` is the evaluation.json text, or the ``Path`` of an
    evaluation.json already written (a run's ``--out``), whose bytes are copied
    as they are. Each frame is cast to its table's schema (:data:`TABLES`; the
    ``cases`` columns of ``catalog``), so every run's files share one schema. Failure →
    :class:`RunError`.
    """
    unknown = sorted(set(frames) - set(TABLE))
    if unknown:
        raise ValueError(f"no such table: {unknown}")
    target = run_dir(store_dir, context, run_id)
    staging = Path(store_dir) / STAGING_DIR / f"{run_id}-{secrets.token_hex(4)}"
    try:
        staging.mkdir(parents=True)
        for spec in table_specs(catalog):
            if spec.name in frames:
                _write_table(staging / spec.file_name, frames[spec.name], spec.schema)
        _write_artifact(staging / ARTIFACT_NAME, artifact)
        _write_text(staging / ORIGIN_NAME, json.dumps(origin.to_json(), ensure_ascii=False))
        target.parent.mkdir(parents=True, exist_ok=True)
        os.rename(staging, target)
        fsync_directory(target.parent)
    except OSError as exc:
        raise RunError(f"{PREFIX}writing the run store {target}: {os_error_text(exc)}") from None
    finally:
        # Only reached with leftovers after a failure or an interrupt.
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
        _remove_if_empty(Path(store_dir) / STAGING_DIR)
    return target


def _write_artifact(path: Path, artifact: str | Path) -> None:
    if isinstance(artifact, Path):
        shutil.copyfile(artifact, path)  # the kernel's copy where it has one
        with path.open("rb") as handle:
            os.fsync(handle.fileno())
        return
    _write_text(path, artifact)


def _write_text(path: Path, text: str) -> None:
    with path.open("w", encoding="utf-8") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())


def _write_table(path: Path, frame: pl.DataFrame, schema: pa.Schema) -> None:
    table = frame.to_arrow().select(schema.names).cast(schema)
    pq.write_table(table, path)


def _remove_if_empty(path: Path) -> None:
    with contextlib.suppress(OSError):
        path.rmdir()


def table_glob(table: str) -> str:
    """The glob, relative to the store root, matching ``table``'s file of every run:
    ``context=*/run=*/<table>.parquet``."""
    file_name = TABLE[table].file_name if table in TABLE else f"{table}.parquet"
    return f"context=*/run=*/{file_name}"


def table_paths(store_dir: str | Path, table: str) -> list[Path]:
    """Every stored run's ``table`` file, sorted (context, then run)."""
    return sorted(Path(store_dir).glob(table_glob(table)))


def scan_runs(store_dir: str | Path, table: str) -> pl.LazyFrame:
    """Every stored run's ``table`` as one lazy hive-partitioned scan.

    The frame carries the partition columns ``context`` and ``run``. Runs
    stored before a column was added read it as null: the scan's schema is the
    table's declared one plus any column a stored file adds (a catalog's extra
    metric). A store with no run yet yields an empty frame with the table's
    schema.
    """
    paths = table_paths(store_dir, table)
    columns = dict(TABLE[table].polars) if table in TABLE else {}
    if not paths:
        return pl.LazyFrame(schema={**columns, **HIVE_SCHEMA})
    for path in paths:
        for name, dtype in pl.read_parquet_schema(path).items():
            columns.setdefault(name, dtype)
    return pl.scan_parquet(
        str(Path(store_dir) / table_glob(table)),
        hive_partitioning=True,
        hive_schema=HIVE_SCHEMA,
        schema=pl.Schema(columns),
        missing_columns="insert",
    )


def dataset(store_dir: str | Path, table: str) -> pads.Dataset:
    """Every stored run's ``table`` as one ``pyarrow.dataset`` with the hive
    columns ``context`` and ``run`` (decoded, strings).

    Built from :func:`table_paths` (the documented file list); the schema is
    the union of the files' schemas, so runs written with extra per-case
    columns read together with the others. A store with no run of a known
    table yields an empty dataset with the table's schema.
    """
    # Imported here: pyarrow.dataset pulls pandas in, and the package promises
    # a pandas-free import.
    import pyarrow.dataset as pads

    paths = table_paths(store_dir, table)
    if paths:
        schema = pa.unify_schemas([pq.read_schema(path) for path in paths])
    elif table in TABLE:
        schema = TABLE[table].schema
    else:
        raise ValueError(f"no such table: {table!r} (and no stored file of that name)")
    for field in HIVE_ARROW_SCHEMA:
        if field.name not in schema.names:
            schema = schema.append(field)
    return pads.dataset(
        [str(path) for path in paths],
        schema=schema,
        format="parquet",
        partitioning=pads.partitioning(HIVE_ARROW_SCHEMA, flavor="hive"),
        partition_base_dir=str(Path(store_dir)),
    )


def list_runs(store_dir: str | Path) -> pl.DataFrame:
    """One row per stored run: ``context``, ``run``, ``path`` (sorted by context, run)."""
    rows: list[dict[str, str]] = []
    for artifact in Path(store_dir).glob(f"context=*/run=*/{ARTIFACT_NAME}"):
        directory = artifact.parent
        rows.append(
            {
                "context": _unquote_component(directory.parent.name, "context="),
                "run": directory.name.removeprefix("run="),
                "path": str(directory),
            }
        )
    frame = pl.DataFrame(rows, schema={"context": pl.String, "run": pl.String, "path": pl.String})
    return frame.sort(["context", "run"])


def _unquote_component(name: str, prefix: str) -> str:
    return unquote(name.removeprefix(prefix))


def read_tables(run_directory: str | Path) -> dict[str, pl.DataFrame]:
    """Every table one stored run holds, by table name, as written."""
    directory = Path(run_directory)
    return {
        spec.name: pl.read_parquet(directory / spec.file_name)
        for spec in TABLES
        if (directory / spec.file_name).is_file()
    }


def read_origin(run_directory: str | Path) -> RunOrigin | None:
    """How a stored run came to be (its ``run.json``); ``None`` when the store
    does not say (a run stored before ``run.json`` was written, or a bare file)."""
    path = Path(run_directory) / ORIGIN_NAME
    try:
        recorded = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    kind = recorded.get("kind") if isinstance(recorded, dict) else None
    writer = recorded.get("writer") if isinstance(recorded, dict) else None
    source = recorded.get("source") if isinstance(recorded, dict) else None
    if kind not in ("run", "ingest") or not isinstance(writer, str):
        return None
    return RunOrigin(kind, writer, source if isinstance(source, str) else None)

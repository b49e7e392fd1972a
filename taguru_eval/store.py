"""The Parquet run store: every run as columnar data, read back with one lazy scan.

Layout (hive partitioning, DESIGN.md "The tables")::

    <store>/context=<ctx>/run=<run_id>/<table>.parquet
    <store>/context=<ctx>/run=<run_id>/evaluation.json

``<ctx>`` is percent-encoded as one path component (Polars decodes it back),
``<run_id>`` is a UTC timestamp plus a short random suffix, so run ids sort in
time order. A run directory appears all at once: it is written under
``<store>/.staging/`` and renamed into place, so a crash or Ctrl-C never leaves
a half-written run where :func:`scan_runs` looks.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Final
from urllib.parse import quote, unquote

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from taguru_eval._base.files import fsync_directory
from taguru_eval.errors import PREFIX, RunError
from taguru_eval.tables.schemas import ARROW_SCHEMAS, polars_schema

DEFAULT_STORE_DIR: Final = "runs"
ARTIFACT_NAME: Final = "evaluation.json"
STAGING_DIR: Final = ".staging"
HIVE_SCHEMA: Final = {"context": pl.String, "run": pl.String}


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


def write_run(
    store_dir: str | Path,
    context: str,
    run_id: str,
    frames: Mapping[str, pl.DataFrame],
    artifact: str | Path,
) -> Path:
    """Write one run's tables and its evaluation.json; returns the run directory.

    ``artifact`` is the evaluation.json text, or the ``Path`` of an
    evaluation.json already written (a run's ``--out``), whose bytes are copied
    as they are. Each frame whose name has a schema in ``tables.ARROW_SCHEMAS``
    is cast to it, so every run's files share one schema. Failure →
    :class:`RunError`.
    """
    target = run_dir(store_dir, context, run_id)
    staging = Path(store_dir) / STAGING_DIR / f"{run_id}-{secrets.token_hex(4)}"
    try:
        staging.mkdir(parents=True)
        for name, frame in frames.items():
            _write_table(staging / f"{name}.parquet", frame, ARROW_SCHEMAS.get(name))
        _write_artifact(staging / ARTIFACT_NAME, artifact)
        target.parent.mkdir(parents=True, exist_ok=True)
        os.rename(staging, target)
        fsync_directory(target.parent)
    except OSError as exc:
        raise RunError(f"{PREFIX}writing the run store {target}: {exc}") from None
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
    with path.open("w", encoding="utf-8") as handle:
        handle.write(artifact)
        handle.flush()
        os.fsync(handle.fileno())


def _write_table(path: Path, frame: pl.DataFrame, schema: pa.Schema | None) -> None:
    table = frame.to_arrow()
    if schema is not None:
        table = table.select(schema.names).cast(schema)
    pq.write_table(table, path)


def _remove_if_empty(path: Path) -> None:
    with contextlib.suppress(OSError):
        path.rmdir()


def scan_runs(store_dir: str | Path, table: str) -> pl.LazyFrame:
    """Every stored run's ``table`` as one lazy hive-partitioned scan.

    The frame carries the partition columns ``context`` and ``run``. A store
    with no run yet yields an empty frame with the table's schema.
    """
    pattern = Path(store_dir) / "context=*" / "run=*" / f"{table}.parquet"
    if not any(Path(store_dir).glob(f"context=*/run=*/{table}.parquet")):
        schema = ARROW_SCHEMAS.get(table)
        columns = dict(polars_schema(schema)) if schema is not None else {}
        return pl.LazyFrame(schema={**columns, **HIVE_SCHEMA})
    return pl.scan_parquet(
        str(pattern),
        hive_partitioning=True,
        hive_schema=HIVE_SCHEMA,
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


def read_artifact(run_directory: str | Path) -> dict[str, object]:
    """The evaluation.json stored beside a run's tables."""
    path = Path(run_directory) / ARTIFACT_NAME
    document: dict[str, object] = json.loads(path.read_text(encoding="utf-8"))
    return document


def read_tables(run_directory: str | Path) -> dict[str, pl.DataFrame]:
    """Every ``<table>.parquet`` of one stored run, by table name."""
    return {
        path.stem: pl.read_parquet(path) for path in sorted(Path(run_directory).glob("*.parquet"))
    }

"""The Parquet run store: every run as columnar data, read back with one lazy scan.

Layout (hive partitioning, DESIGN.md "The tables")::

    <store>/context=<ctx>/run=<run_id>/<table>.parquet
    <store>/context=<ctx>/run=<run_id>/evaluation.json.zst  (runs stored before: evaluation.json)
    <store>/context=<ctx>/run=<run_id>/run.json       (how the run came to be)

``<ctx>`` is percent-encoded as one path component (Polars, DuckDB, Spark and
pyarrow decode it back), ``<run_id>`` is a UTC timestamp plus a short random
suffix, so run ids sort in time order. A run directory appears all at once: it
is written under ``<store>/.staging/`` and renamed into place, so a crash or
Ctrl-C never leaves a half-written run where :func:`scan_runs` looks.

The layout is a contract for query engines (docs/store.md): one
table's files across every run are the glob :func:`table_glob` names, with
``context`` and ``run`` as hive partition columns. Tables are written with
zstd compression and the artifact as ``evaluation.json.zst``
(:mod:`taguru_eval.store_artifact` knows both artifact layouts; runs stored
before it hold an uncompressed ``evaluation.json`` and read as well).
Directories whose name starts with a dot (``.staging``, ``.partial``) are
never runs. Because one run directory
holds every table (and the JSON files), a directory-discovering reader such as
``pyarrow.dataset("runs", partitioning="hive")`` would mix tables; it is
given the table's file list instead (:func:`table_paths`, :func:`dataset`).

A damaged run never breaks the store for the others: :func:`scan_runs`,
:func:`dataset` and :func:`collect_runs` check every run's file (its Parquet
footer, and the declared columns' types) and leave a damaged one out with a
:class:`~taguru_eval.errors.DamagedRunWarning` naming the file; reading one
run the caller named (:func:`read_table`, :func:`read_tables`,
:func:`read_origin`) raises an :class:`~taguru_eval.errors.InputError`
naming it instead. A store or a table name that does not exist is an
``InputError`` too, never an empty frame that hides a typo.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import secrets
import shutil
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Final, Literal
from urllib.parse import quote, unquote

import polars as pl

from taguru_eval._base.filebytes import ReadCap, file_bytes
from taguru_eval._base.files import fsync_directory, is_abandoned
from taguru_eval._base.ids import new_run_id as new_run_id
from taguru_eval.catalog import CATALOG, Catalog
from taguru_eval.contract import VERSION
from taguru_eval.errors import (
    DamagedRunWarning,
    InputError,
    RunError,
    os_error_text,
    warn,
)
from taguru_eval.store_artifact import COMPRESSED_NAME, stored_runs, write_stored
from taguru_eval.tables.schemas import TABLE, TABLES, TableSpec, plain_arrow, table_specs

if TYPE_CHECKING:
    import pyarrow as pa
    import pyarrow.dataset as pads

STAGING_DIR: Final = ".staging"
ORIGIN_NAME: Final = "run.json"
ORIGIN_CAP: Final = ReadCap(1 << 20, "a run.json")
HIVE_SCHEMA: Final = {"context": pl.String, "run": pl.String}
"""The partition columns, always strings (a context named ``2024`` stays text)."""


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


class StagedRun:
    """One run on its way into the store: its tables are written into a staging
    directory on a thread of their own (Parquet writing leaves the GIL to the
    caller, who meanwhile builds and writes evaluation.json); :meth:`finish`
    adds the artifact and ``run.json`` and renames the run into place,
    :meth:`abandon` removes what was staged.

    The run is staged in ``<store>/.staging/<run_id>.<pid>.<random>``;
    staging directories killed writers left are removed first
    (:func:`remove_abandoned_staging`).
    """

    def __init__(
        self,
        store_dir: str | Path,
        context: str,
        run_id: str,
        frames: Mapping[str, pl.DataFrame],
        *,
        origin: RunOrigin,
        catalog: Catalog = CATALOG,
    ) -> None:
        unknown = sorted(set(frames) - set(TABLE))
        if unknown:
            raise ValueError(f"no such table: {unknown}")
        self._store_dir = store_dir
        self.target = run_dir(store_dir, context, run_id)
        self._staging_root = Path(store_dir) / STAGING_DIR
        self._staging = self._staging_root / f"{run_id}.{os.getpid()}.{secrets.token_hex(4)}"
        self._origin = origin
        self._failure: BaseException | None = None
        self._writer = threading.Thread(
            target=self._write_tables, args=(frames, catalog), name="run-store", daemon=True
        )
        self._writer.start()

    def _write_tables(self, frames: Mapping[str, pl.DataFrame], catalog: Catalog) -> None:
        try:
            remove_abandoned_staging(self._store_dir)
            self._staging.mkdir(parents=True)
            for spec in table_specs(catalog):
                if spec.name in frames:
                    _write_table(self._staging / spec.file_name, frames[spec.name], spec.polars)
        except BaseException as exc:  # handed to whoever finishes the run
            self._failure = exc

    def finish(self, artifact: str | Path, before_rename: Callable[[], None] | None = None) -> Path:
        """Adds ``artifact`` (the evaluation.json text, or the ``Path`` of one already
        written, whose bytes are streamed from the file and stored compressed, as
        they are) and ``run.json``, and moves the run into place; returns the run
        directory. ``before_rename`` runs once everything is staged, just before
        the rename (a resumed run's checkpoint is retired there). Failure →
        :class:`RunError`."""
        self._writer.join()
        try:
            if self._failure is not None:
                raise self._failure
            write_stored(self._staging / COMPRESSED_NAME, artifact)
            _write_text(
                self._staging / ORIGIN_NAME, json.dumps(self._origin.to_json(), ensure_ascii=False)
            )
            self.target.parent.mkdir(parents=True, exist_ok=True)
            if before_rename is not None:
                before_rename()
            os.rename(self._staging, self.target)
            fsync_directory(self.target.parent)
        except OSError as exc:
            raise RunError(f"writing the run store {self.target}: {os_error_text(exc)}") from None
        finally:
            self._failure = None
            # Only reached with leftovers after a failure or an interrupt.
            self._remove_staging()
        return self.target

    def abandon(self) -> None:
        """The run is not stored: waits for the tables' writer, then removes them."""
        self._writer.join()
        self._remove_staging()

    def _remove_staging(self) -> None:
        if self._staging.exists():
            shutil.rmtree(self._staging, ignore_errors=True)
        _remove_if_empty(self._staging_root)


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
    evaluation.json already written (a run's ``--out``), whose bytes are
    streamed into the stored ``evaluation.json.zst`` as they are. Each frame
    is cast to its table's schema (:data:`TABLES`; the ``cases`` columns of
    ``catalog``), so every run's files share one schema.
    The run appears all at once (:class:`StagedRun`). Failure → :class:`RunError`.
    """
    staged = StagedRun(store_dir, context, run_id, frames, origin=origin, catalog=catalog)
    return staged.finish(artifact)


_STAGING_OWNER: Final = re.compile(r"\.(?P<pid>[1-9][0-9]*)\.[0-9a-f]{8}\Z")
"""The end of a staging directory's name: ``.<writer pid>.<8 hex digits>``."""


def remove_abandoned_staging(store_dir: str | Path) -> list[Path]:
    """Remove the staging directories killed writers left in ``<store>/.staging``
    (last modified before this process started, their writer's pid gone:
    :func:`taguru_eval._base.files.is_abandoned`); returns them.

    A directory whose name carries no pid (staged by a version before this
    rule) is left alone: nothing says its writer is gone. Best effort.
    """
    removed: list[Path] = []
    with contextlib.suppress(OSError):
        for entry in (Path(store_dir) / STAGING_DIR).iterdir():
            owner = _STAGING_OWNER.search(entry.name)
            if owner is None or not entry.is_dir():
                continue
            if is_abandoned(entry, int(owner.group("pid"))):
                shutil.rmtree(entry, ignore_errors=True)
                removed.append(entry)
    return removed


def _write_text(path: Path, text: str) -> None:
    with path.open("w", encoding="utf-8") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())


def _write_table(path: Path, frame: pl.DataFrame, schema: pl.Schema) -> None:
    """``frame``'s declared columns, in order and of their declared types, as
    one zstd Parquet file (Polars' own writer: a run never imports pyarrow).

    The Parquet types are the ones pyarrow's writer gave (strings, lists,
    int32, float); the Arrow hint stored beside them names Polars' large
    strings and lists, which :func:`dataset` reads back as the declared ones."""
    table = frame.select(schema.names()).cast(schema)
    # zstd: a fraction of the default snappy's bytes, read as fast (benchmarks/store_size.py).
    table.write_parquet(path, compression="zstd")


def _remove_if_empty(path: Path) -> None:
    with contextlib.suppress(OSError):
        path.rmdir()


# ------------------------------------------------------------------ reading, checked


def table_error(shown: str | Path, detail: str) -> InputError:
    """A run-store table that cannot be used: ``<file>: malformed run-store table: …``."""
    return InputError(f"{shown}: malformed run-store table: {detail}", path=str(shown))


def first_line(exc: BaseException) -> str:
    """An exception's first line (Polars' messages run to several)."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


PARQUET_FAILURES: Final = (OSError, pl.exceptions.PolarsError, pl.exceptions.PanicException)
"""What a damaged Parquet file makes Polars raise (a panic included)."""


def table_spec(table: str, catalog: Catalog = CATALOG) -> TableSpec:
    """The spec of ``table`` (``cases`` with ``catalog``'s columns); an unknown
    name is an :class:`InputError` listing the tables."""
    specs = {spec.name: spec for spec in table_specs(catalog)}
    if table not in specs:
        raise InputError(f"no table '{table}' in the run store (one of: {', '.join(specs)})")
    return specs[table]


def require_store(store_dir: str | Path) -> Path:
    """``store_dir`` as a path, or an :class:`InputError` when it is not a directory."""
    path = Path(store_dir)
    try:
        path.stat()
        if not path.is_dir():
            raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR))
    except OSError as exc:
        raise InputError(
            f"reading the run store {store_dir}: {os_error_text(exc)}", path=str(store_dir)
        ) from None
    return path


ALWAYS_STORED: Final = (
    "calls",
    "case_lanes",
    "hits",
    "resolutions",
    "probes",
    "attributions",
    "citation_checks",
    "cases",
    "metrics",
)
"""The tables every version of the store has written for every run. A run
directory without one of them is damaged (a file deleted or lost by hand): read
as an empty table it would say the run served no hit. The later tables
(``evidence_items``, ``refusal_*``) are absent from runs stored before them."""


def missing_table(run_directory: str | Path, tables: Sequence[str] = ALWAYS_STORED) -> Path | None:
    """The file of the first of ``tables`` every stored run holds that this run
    directory lacks (:data:`ALWAYS_STORED`), or ``None``."""
    directory = Path(run_directory)
    for name in tables:
        path = directory / TABLE[name].file_name
        if name in ALWAYS_STORED and not path.is_file():
            return path
    return None


def missing_table_error(path: Path) -> InputError:
    """The error for a stored run's missing table file."""
    return table_error(path, "the file is missing (every stored run holds this table)")


def require_tables(run_directory: str | Path, tables: Sequence[str] = ALWAYS_STORED) -> None:
    """An :class:`InputError` naming the first of ``tables`` every stored run holds
    that ``run_directory`` lacks."""
    missing = missing_table(run_directory, tables)
    if missing is not None:
        raise missing_table_error(missing)


def checked_schema(
    path: str | Path, declared: Mapping[str, pl.DataType], shown: str | Path | None = None
) -> dict[str, pl.DataType]:
    """A stored table file's schema, read from its Parquet footer, with every
    declared column it holds of its declared type.

    The cheap check of a run's file: a truncated file, garbage bytes or a
    column of another type is an :class:`InputError` naming the file (damage
    inside the data pages shows only when they are read). Columns a catalog
    added are not declared and pass.
    """
    label = path if shown is None else shown
    try:
        schema = pl.read_parquet_schema(path)
    except PARQUET_FAILURES as exc:
        raise table_error(label, first_line(exc)) from None
    for name, dtype in schema.items():
        expected = declared.get(name)
        if expected is not None and dtype != expected:
            raise table_error(label, f"{name}: expected {expected}, got {dtype}")
    return schema


def read_table(
    path: str | Path, spec: TableSpec, *, columns: list[str] | None = None
) -> pl.DataFrame:
    """One stored table file, checked (:func:`checked_schema`) and read; any
    damage is an :class:`InputError` naming the file."""
    checked_schema(path, spec.polars)
    try:
        return pl.read_parquet(path, columns=columns)
    except PARQUET_FAILURES as exc:
        raise table_error(path, first_line(exc)) from None


@dataclass(frozen=True)
class TableFiles:
    """The usable files of one table across a store, and the schema they scan with."""

    table: str
    paths: list[Path]
    schema: pl.Schema
    """The table's declared columns plus any column a stored file adds (the
    partition columns ``context`` and ``run`` are added by the scan)."""


def table_files(
    store_dir: str | Path,
    table: str,
    catalog: Catalog = CATALOG,
    *,
    run_dirs: Sequence[Path] | None = None,
) -> TableFiles:
    """Every stored run's ``table`` file (or only those of ``run_dirs``) whose
    footer reads and whose declared columns have their declared types; each
    other one is left out with a :class:`DamagedRunWarning` naming it.

    An extra column (one a catalog adds) takes the type of the first run that
    has it; a later run holding it with another type is left out too. A run
    without the file of a table every run holds (:data:`ALWAYS_STORED`) is
    left out with a warning too: it is damaged, not a run with no rows.
    """
    spec = table_spec(table, catalog)
    root = require_store(store_dir)
    columns: dict[str, pl.DataType] = dict(spec.polars)
    usable: list[Path] = []
    if run_dirs is None:
        run_dirs = stored_runs(root, "context=*/run=*")
        candidates = table_paths(root, table)
    else:
        candidates = [path for path in (d / spec.file_name for d in run_dirs) if path.is_file()]
    if table in ALWAYS_STORED:
        for directory in run_dirs:
            missing = missing_table(directory, (table,))
            if missing is not None:
                warn_damaged(missing_table_error(missing))
    for path in candidates:
        try:
            found = checked_schema(path, columns)
        except InputError as error:
            warn_damaged(error)
            continue
        usable.append(path)
        for name, dtype in found.items():
            columns.setdefault(name, dtype)
    return TableFiles(table, usable, pl.Schema(columns))


_DECLARED: Final[Mapping[str, pl.Schema]] = {spec.name: spec.polars for spec in TABLES}
"""Each table's declared Polars schema, derived once."""


def check_run(run_directory: str | Path, tables: Sequence[str] = ("cases", "metrics")) -> None:
    """Check the cheap signs of a stored run's health: its ``run.json`` (when
    present) and the footers and column types of its ``tables`` files (each
    one every run holds present). The first damaged or missing file is an
    :class:`InputError` naming it."""
    directory = Path(run_directory)
    read_origin(directory)
    require_tables(directory, tables)
    for name in tables:
        path = directory / TABLE[name].file_name
        if path.is_file():
            checked_schema(path, _DECLARED[name])


def warn_damaged(error: InputError) -> None:
    """Tell the caller a stored run is left out, naming its damaged file."""
    warn(DamagedRunWarning(f"skipping a damaged stored run: {error.message}"))


def scan_files(files: TableFiles) -> pl.LazyFrame:
    """One lazy hive-partitioned scan of ``files`` (empty with the schema when none)."""
    if not files.paths:
        return pl.LazyFrame(schema={**files.schema, **HIVE_SCHEMA})
    return pl.scan_parquet(
        files.paths,
        hive_partitioning=True,
        hive_schema=HIVE_SCHEMA,
        schema=files.schema,
        missing_columns="insert",
    )


def collect_runs(
    store_dir: str | Path,
    table: str,
    query: Callable[[pl.LazyFrame], pl.LazyFrame],
    catalog: Catalog = CATALOG,
    *,
    run_dirs: Sequence[Path] | None = None,
) -> pl.DataFrame:
    """``query`` applied to :func:`scan_runs` of ``table`` (only ``run_dirs``'
    files when given), collected.

    The footer check cannot see damage inside a file's data pages; when the
    scan fails, each file is read alone through ``query`` to find the damaged
    ones, which are left out with a :class:`DamagedRunWarning`, and the rest
    is collected. So a damaged run never ends the caller's work with a Polars
    error.
    """
    files = table_files(store_dir, table, catalog, run_dirs=run_dirs)
    try:
        return query(scan_files(files)).collect()
    except PARQUET_FAILURES:
        pass
    usable: list[Path] = []
    for path in files.paths:
        try:
            query(scan_files(TableFiles(table, [path], files.schema))).collect()
        except PARQUET_FAILURES as exc:
            warn_damaged(table_error(path, first_line(exc)))
            continue
        usable.append(path)
    return query(scan_files(TableFiles(table, usable, files.schema))).collect()


def table_glob(table: str) -> str:
    """The glob, relative to the store root, matching ``table``'s file of every run:
    ``context=*/run=*/<table>.parquet``."""
    file_name = TABLE[table].file_name if table in TABLE else f"{table}.parquet"
    return f"context=*/run=*/{file_name}"


def table_paths(store_dir: str | Path, table: str) -> list[Path]:
    """Every stored run's ``table`` file, sorted (context, then run)."""
    return sorted(Path(store_dir).glob(table_glob(table)))


def scan_runs(store_dir: str | Path, table: str, catalog: Catalog = CATALOG) -> pl.LazyFrame:
    """Every stored run's ``table`` as one lazy hive-partitioned scan.

    The frame carries the partition columns ``context`` and ``run``. Runs
    stored before a column was added read it as null: the scan's schema is the
    table's declared one plus any column a stored file adds (a catalog's extra
    metric). A store with no run of the table yields an empty frame with the
    table's schema; a store that does not exist, or a table name that is not
    one of :data:`TABLES`, is an :class:`InputError`. A run whose file is
    damaged is left out with a :class:`DamagedRunWarning` (:func:`table_files`;
    :func:`collect_runs` also catches damage inside data pages).
    """
    return scan_files(table_files(store_dir, table, catalog))


def dataset(store_dir: str | Path, table: str) -> pads.Dataset:
    """Every stored run's ``table`` as one ``pyarrow.dataset`` with the hive
    columns ``context`` and ``run`` (decoded, strings).

    Built from the checked file list (:func:`table_files`: damaged runs left
    out with a warning); the schema is the union of the files' schemas, so
    runs written with extra per-case columns read together with the others. A
    store with no run of the table yields an empty dataset with the table's
    schema; an unknown table or a missing store is an :class:`InputError`.
    """
    # Imported here: pyarrow.dataset pulls pandas in, and the package promises
    # a pandas-free import; a run never imports pyarrow at all.
    import pyarrow as pa
    import pyarrow.dataset as pads
    import pyarrow.parquet as pq

    paths = table_files(store_dir, table).paths
    if paths:
        # Files pyarrow wrote declare plain strings and lists, files Polars wrote
        # large ones (the same Parquet types): both read as the declared ones.
        schema = pa.unify_schemas([_declared(pq.read_schema(path)) for path in paths])
    else:
        schema = TABLE[table].arrow
    hive = pa.schema([pa.field(name, pa.string()) for name in HIVE_SCHEMA])
    for field in hive:
        if field.name not in schema.names:
            schema = schema.append(field)
    return pads.dataset(
        [str(path) for path in paths],
        schema=schema,
        format="parquet",
        partitioning=pads.partitioning(hive, flavor="hive"),
        partition_base_dir=str(Path(store_dir)),
    )


def _declared(schema: pa.Schema) -> pa.Schema:
    """A stored file's Arrow schema with plain strings and lists (:func:`plain_arrow`)."""
    import pyarrow as pa

    return pa.schema(
        [field.with_type(plain_arrow(field.type)) for field in schema], metadata=schema.metadata
    )


def list_runs(store_dir: str | Path) -> pl.DataFrame:
    """One row per stored run: ``context``, ``run``, ``path`` (sorted by context, run)."""
    rows: list[dict[str, str]] = []
    for directory in stored_runs(store_dir, "context=*/run=*"):
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
    """Every table one stored run holds, by table name, as written.

    Each file is checked (:func:`read_table`): a damaged one is an
    :class:`InputError` naming it.
    """
    directory = Path(run_directory)
    return {
        spec.name: read_table(directory / spec.file_name, spec)
        for spec in TABLES
        if (directory / spec.file_name).is_file()
    }


def read_origin(run_directory: str | Path) -> RunOrigin | None:
    """How a stored run came to be (its ``run.json``); ``None`` when the store
    does not say (a run stored before ``run.json`` was written, or a bare file).

    A ``run.json`` that is there but unreadable, not JSON, or not the object
    :class:`RunOrigin` writes is an :class:`InputError` naming it.
    """
    path = Path(run_directory) / ORIGIN_NAME
    if not path.is_file():
        return None
    try:
        recorded = json.loads(file_bytes(path, ORIGIN_CAP).decode("utf-8"))
    except OSError as exc:
        raise InputError(f"reading {path}: {os_error_text(exc)}", path=str(path)) from None
    except ValueError as exc:  # invalid UTF-8 or JSON
        raise InputError(f"{path}: malformed run.json: {exc}", path=str(path)) from None
    except RecursionError:
        raise InputError(
            f"{path}: malformed run.json: recursion limit exceeded", path=str(path)
        ) from None
    fields = recorded if isinstance(recorded, dict) else {}
    kind, writer, source = fields.get("kind"), fields.get("writer"), fields.get("source")
    if kind not in ("run", "ingest") or not isinstance(writer, str):
        raise InputError(
            f"{path}: malformed run.json: expected an object with 'kind' (run or ingest) "
            "and a string 'writer'",
            path=str(path),
        )
    if source is not None and not isinstance(source, str):
        raise InputError(f"{path}: malformed run.json: 'source' must be a string", path=str(path))
    return RunOrigin(kind, writer, source)

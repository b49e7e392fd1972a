"""Reading one side of ``compare`` from a stored run directory's Parquet tables.

A run in the Parquet store (``runs/context=<ctx>/run=<id>/``) keeps its
evaluation.json beside ``cases.parquet`` and ``metrics.parquet``. Decoding the
whole artifact costs seconds for a 100,000-case run, almost all of it in the
``cases`` array, so this reader takes:

* the nine per-case comparison values from ``cases.parquet`` (columns of
  :data:`taguru_eval.tables.CASES_SCHEMA`), gated exactly as the artifact
  writer gates its blocks (a ``recall`` block only when
  ``recall_expected_total`` is set, and so on), so a value is null precisely
  when the artifact's reader-side path (GATE_AND_COMPARE.md §3) is absent,
  and read back as taguru reads the artifact's spelling of it (ERRATA row 24);
* the aggregate values from ``metrics.parquet``, turned back into the metric
  objects the artifact holds, so they are still decoded only through the
  run's ``definitions[name].statistic`` (§6.6);
* every run-level fact (stamp, generated_at, context, budget, corpus,
  thresholds identity, definitions) from the head of evaluation.json: the
  bytes before its top-level ``"cases"`` key (EVALUATE.md §6.1 puts every one
  of them first), read with a bounded streaming read and decoded by the same
  typed decoder and messages as a whole file.

Anything unexpected about the head (another key order, an escaped key, no
``cases`` key within :data:`HEAD_LIMIT` bytes) falls back to decoding the
whole evaluation.json, cases and metrics included — always correct, only
slower. A directory without both tables is read the same way. Only the head
of the file is checked on the fast path: the tables stand in for the rest.
A table that exists but cannot be read, or lacks a column, is an
:class:`InputError` naming the file (exit 2); so is an unreadable
evaluation.json, with the message the whole-file reader gives.
"""

from __future__ import annotations

import functools
import math
import os
import re
from dataclasses import replace
from pathlib import Path
from typing import BinaryIO, Final

import msgspec
import polars as pl

from taguru_eval._base.serde_numbers import read_back
from taguru_eval.artifact.codec import is_utf8
from taguru_eval.catalog import CATALOG, STABILITY_BLOCK, STABILITY_COLUMNS, Catalog
from taguru_eval.compare.abstention import SIDE_SCHEMA, AbstentionSide
from taguru_eval.compare.load import RunView, decode_header, read_view
from taguru_eval.compare.stability import StabilitySide, side_from_columns
from taguru_eval.errors import InputError, os_error_text
from taguru_eval.score.abstention import effective_floors
from taguru_eval.store import PARQUET_FAILURES, first_line, table_error
from taguru_eval.store_artifact import open_artifact, stored_artifact
from taguru_eval.tables.schemas import TABLE

CASES_FILE: Final = TABLE["cases"].file_name
METRICS_FILE: Final = TABLE["metrics"].file_name
REFUSAL_CASES_FILE: Final = TABLE["refusal_cases"].file_name
FLOOR_TABLES: Final = (TABLE["case_lanes"].file_name, TABLE["refusal_lanes"].file_name)
"""The lane tables whose ``plan_vector_floor`` columns give a run's effective floors."""

FIRST_READ: Final = 1 << 20
"""Bytes read first; a real artifact's head (definitions included) is far smaller."""

HEAD_LIMIT: Final = 64 << 20
"""Past this many bytes without a top-level ``cases`` key, decode the whole file."""

HEAD_KEYS: Final = frozenset(
    {b"taguru_evaluation", b"generated_at", b"inputs", b"corpus", b"thresholds", b"definitions"}
)
"""Top-level keys compare reads besides cases and metrics; all must precede ``cases``."""

_METRIC_FIELDS: Final = tuple(
    name for name in TABLE["metrics"].polars if name not in ("run_id", "metric", "statistic")
)
"""Every value column of metrics.parquet; a metric object is its non-null ones."""


def read_side(
    source: str | os.PathLike[str],
    *,
    label: str | None = None,
    catalog: Catalog = CATALOG,
    stamp_required: bool = False,
) -> RunView:
    """Load one side: a stored run directory through its tables when it has
    both, otherwise (a file, or a directory without tables) its evaluation.json.

    Raises :class:`InputError` with the §6.2 messages, or naming the table
    file that could not be read; ``stamp_required`` is
    :func:`~taguru_eval.compare.load.read_view`'s.
    """
    whole = functools.partial(
        read_view, source, label=label, catalog=catalog, stamp_required=stamp_required
    )
    given = os.fspath(source)
    directory = Path(given)
    shown_label = given if label is None else label
    if not (
        directory.is_dir()
        and (directory / CASES_FILE).is_file()
        and (directory / METRICS_FILE).is_file()
    ):
        return whole()
    artifact = stored_artifact(directory)
    shown = os.path.join(given, artifact.name)
    head = read_head(artifact, shown)
    if head is None:
        return whole()
    # evaluation.json is validated before the tables are read, as the whole
    # file would be first. The head is a prefix of the file, so a malformed
    # or out-of-range field in it gets the same message (and line/column).
    no_cases = pl.DataFrame(
        schema={"case_id": pl.String, **dict.fromkeys(catalog.compared, pl.Float64)}
    )
    header = decode_header(
        head,
        shown,
        label=shown_label,
        cases=no_cases,
        duplicates=(),
        metrics={},
        stamp_required=stamp_required,
    )
    cases, duplicates = stored_cases(
        directory / CASES_FILE, os.path.join(given, CASES_FILE), catalog
    )
    metrics = stored_metrics(directory / METRICS_FILE, os.path.join(given, METRICS_FILE))
    stability = stored_stability(
        directory / CASES_FILE, os.path.join(given, CASES_FILE), header.repeat
    )
    if header.must_refuse_rule is not None or header.must_refuse_sha256 is not None:
        # The abstention block follows ``cases`` in the file; its facts are in the tables.
        if not all((directory / name).is_file() for name in (REFUSAL_CASES_FILE, *FLOOR_TABLES)):
            return whole()
        header = replace(header, abstention=stored_abstention(directory, given, header))
    return replace(
        header,
        cases=cases,
        duplicate_case_ids=duplicates,
        metrics=metrics,
        stability=stability,
    )


# ------------------------------------------------------------------ the artifact head


_TOKEN: Final = re.compile(rb'["{}\[\],]')
_STRING_REST: Final = re.compile(rb'(?:[^"\\]|\\.)*"', re.DOTALL)
_LEADING_SPACE: Final = re.compile(rb"[ \t\r\n]*")


def read_head(path: Path, shown: str) -> bytes | None:
    """The artifact's top-level object without ``cases`` and everything after
    it, as a standalone JSON object, or ``None`` when the head cannot be
    trusted to hold every run-level fact (see :func:`head_of`) or the file
    does not end as a JSON object does (:func:`ends_closed`: a truncated file
    is then read whole, and its error names it). ``path`` is either layout of
    a stored artifact (:func:`~taguru_eval.store_artifact.open_artifact`)."""
    try:
        with open_artifact(path) as handle:
            head, read = _head(handle)
            if head is None or not ends_closed(handle, read[-_TAIL:]):
                return None
            return head
    except OSError as exc:
        raise InputError(f"reading {shown}: {os_error_text(exc)}", path=shown) from None


def _head(handle: BinaryIO) -> tuple[bytes | None, bytes]:
    """The head (:func:`head_of`) and every byte read to find it."""
    data = handle.read(FIRST_READ)
    while True:
        cut = head_of(data)
        if cut is not None:
            return (cut if is_utf8(cut) else None), data
        if len(data) >= HEAD_LIMIT:
            return None, data
        more = handle.read(len(data))
        if not more:
            return None, data
        data += more


_TAIL: Final = 64
"""Bytes read from a file's end to see how it ends."""


def ends_closed(handle: BinaryIO, read: bytes = b"") -> bool:
    """Whether the file's last byte other than JSON whitespace is ``}`` — the
    cheap sign that an evaluation.json was not cut short (a truncated one ends
    mid-value). A seekable file is read at its end; a compressed stream is
    read on to its end (``read`` is the end of what was read before), which
    is also where the codec finds a truncated stream (an :class:`OSError`)."""
    if handle.seekable():
        size = handle.seek(0, os.SEEK_END)
        handle.seek(max(0, size - _TAIL))
        tail = handle.read()
    else:
        tail = read
        while chunk := handle.read(_DRAIN):
            tail = (tail + chunk)[-_TAIL:]
    return tail.rstrip(b" \t\r\n").endswith(b"}")


_DRAIN: Final = 1 << 20


def head_of(data: bytes) -> bytes | None:
    """``data``'s top-level object cut just before its ``"cases"`` member and
    closed with ``}``, or ``None`` when that cannot be done safely: no
    ``cases`` key inside ``data``, a top-level key spelled with an escape, or
    one of :data:`HEAD_KEYS` not before ``cases`` (it might follow it)."""
    leading = _LEADING_SPACE.match(data)
    pos = 0 if leading is None else leading.end()
    if data[pos : pos + 1] != b"{":
        return None
    depth = 0
    expecting_key = False
    separator = pos
    keys: set[bytes] = set()
    while True:
        match = _TOKEN.search(data, pos)
        if match is None:
            return None
        char = data[match.start()]
        pos = match.end()
        if char == 0x22:  # '"'
            rest = _STRING_REST.match(data, pos)
            if rest is None:
                return None
            if depth == 1 and expecting_key:
                key = data[pos : rest.end() - 1]
                if b"\\" in key:
                    return None
                if key == b"cases":
                    break
                keys.add(key)
                expecting_key = False
            pos = rest.end()
        elif char in b"{[":
            depth += 1
            if depth == 1:
                expecting_key = True
        elif char in b"}]":
            depth -= 1
            if depth == 0:
                return None
        elif depth == 1:  # ','
            expecting_key = True
            separator = match.start()
    if not keys.issuperset(HEAD_KEYS):
        return None
    if data[separator : separator + 1] == b"{":
        return data[: separator + 1] + b"}"
    return data[:separator] + b"}"


# ------------------------------------------------------------------ the tables


def _read_table(path: Path, shown: str, columns: list[str]) -> pl.DataFrame:
    try:
        return pl.read_parquet(path, columns=columns)
    except pl.exceptions.ColumnNotFoundError as exc:
        raise table_error(shown, f"missing column {first_line(exc)}") from None
    except PARQUET_FAILURES as exc:
        raise table_error(shown, first_line(exc)) from None


def stored_cases(
    path: Path, shown: str, catalog: Catalog = CATALOG
) -> tuple[pl.DataFrame, tuple[str, ...]]:
    """The per-case comparison values of a stored run: compare's case frame
    (``case_id`` plus one Float64 column per comparison metric, the last
    occurrence of a case_id kept) and the repeated case_ids in file order."""
    fields = {name: catalog.per_case[name] for name in catalog.compared}
    value_columns = {field.column for field in fields.values()}
    block_columns = {field.written_when for field in fields.values()}
    columns = ["case_index", "case_id", *sorted(value_columns | block_columns)]
    table = _read_table(path, shown, columns)
    if table.schema["case_id"] != pl.String:
        raise table_error(
            shown, f"case_id: expected a string column, got {table.schema['case_id']}"
        )
    for column in columns:
        if column != "case_id" and not table.schema[column].is_numeric():
            raise table_error(
                shown, f"{column}: expected a numeric column, got {table.schema[column]}"
            )

    def value(metric: str) -> pl.Expr:
        case_field = fields[metric]
        # NaN is written as null by the artifact (a non-finite f64 is null).
        number = pl.col(case_field.column).cast(pl.Float64).fill_nan(None)
        # A value counts only where the artifact writes its block (artifact.layout).
        return pl.when(pl.col(case_field.written_when).is_not_null()).then(number).alias(metric)

    frame = table.sort("case_index", nulls_last=True, maintain_order=True).select(
        pl.col("case_id").fill_null(""), *[value(metric) for metric in fields]
    )
    # As taguru reads them back from the evaluation.json they were written to.
    frame = frame.with_columns(read_back(frame.get_column(metric)) for metric in fields)
    duplicates = tuple(
        frame.filter(~pl.col("case_id").is_first_distinct()).get_column("case_id").to_list()
    )
    if duplicates:
        frame = frame.unique(subset="case_id", keep="last", maintain_order=True)
    return frame, duplicates


def stored_stability(path: Path, shown: str, repeat: int | None) -> StabilitySide | None:
    """A stored run's per-case stability verdicts (``run --repeat``), as compare
    reads them from the case blocks' ``stability``; None for a run stored
    without the columns (every run not given --repeat N > 1)."""
    try:
        names = pl.read_parquet_schema(path).keys()
    except PARQUET_FAILURES as exc:  # pragma: no cover - the cases were read just before
        raise table_error(shown, first_line(exc)) from None
    if STABILITY_BLOCK not in names:
        return None
    columns = ["case_index", "case_id", *STABILITY_COLUMNS]
    table = _read_table(path, shown, columns)
    return side_from_columns(table.sort("case_index", nulls_last=True, maintain_order=True), repeat)


def stored_abstention(directory: Path, given: str, header: RunView) -> AbstentionSide:
    """A stored run's must-refuse verdicts (``refusal_cases``) and effective
    floors (the ``plan_vector_floor`` of its lane tables), as compare reads
    them from an ``abstention`` block."""
    verdicts = _read_table(
        directory / REFUSAL_CASES_FILE,
        os.path.join(given, REFUSAL_CASES_FILE),
        ["case_index", "case_id", "kind", "verdict"],
    )
    floor_frames = [
        _read_table(directory / name, os.path.join(given, name), ["plan_vector_floor"])
        for name in FLOOR_TABLES
    ]
    return AbstentionSide(
        rule=header.must_refuse_rule,
        floors=tuple(effective_floors(*floor_frames)),
        sha256=header.must_refuse_sha256,
        cases=verdicts.sort("case_index").select(list(SIDE_SCHEMA)).cast(SIDE_SCHEMA),  # type: ignore[arg-type]
    )


def stored_metrics(path: Path, shown: str) -> dict[str, bytes]:
    """The aggregate metrics of a stored run as the JSON objects the artifact
    holds under ``metrics`` (non-null, finite fields only), by metric name."""
    table = _read_table(path, shown, ["metric", *_METRIC_FIELDS])
    if table.schema["metric"] != pl.String:
        raise table_error(shown, f"metric: expected a string column, got {table.schema['metric']}")
    metrics: dict[str, bytes] = {}
    for row in table.iter_rows(named=True):
        name = row.pop("metric")
        if name is None:
            raise table_error(shown, "metric: a row has no metric name")
        fields = {
            key: value
            for key, value in row.items()
            if value is not None and not (isinstance(value, float) and not math.isfinite(value))
        }
        metrics[name] = msgspec.json.encode(fields)
    return metrics

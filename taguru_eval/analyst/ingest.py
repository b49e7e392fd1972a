"""Importing an existing evaluation.json into the run store.

An evaluation.json — written by this project or by taguru's own ``evaluate``
— is turned back into the tables it carries and written to the run store
beside a verbatim copy of the file:

* ``case_lanes``, ``hits``, ``resolutions``, ``probes``, ``attributions``,
  ``citation_checks``: rebuilt from each case block by the same builder a live
  run uses, since the case block shapes are exactly the lane-output shapes;
* ``calls``: one row per call the recorded shapes imply (outcome and latency
  are known, ``http_status`` is not recorded and stays null);
* ``cases``: the per-case metrics **as the artifact states them** (nothing is
  re-scored — the eval set is not available, and the numbers must match the
  file);
* ``metrics``: the aggregate map, each shape read through ``definitions``.

The run id is ``<generated_at as YYYYMMDDTHHMMSSZ>-<first 12 hex of the file's
sha256>``, so importing the same file twice is a no-op (as is importing the
evaluation.json of a run already in the store)."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import polars as pl

from taguru_eval.artifact import codec
from taguru_eval.artifact.read import artifact_catalog, tables_from_artifact
from taguru_eval.compare.load import decode_view
from taguru_eval.errors import InputError
from taguru_eval.options import DEFAULT_STORE_DIR
from taguru_eval.store import (
    RunOrigin,
    context_dir,
    write_run,
)
from taguru_eval.store_artifact import same_bytes, stored_artifact, stored_runs


@dataclass(frozen=True)
class IngestResult:
    """Where the run lives and whether this call wrote it."""

    context: str
    run_id: str
    path: Path
    created: bool


def derive_run_id(document: Mapping[str, Any], data: bytes) -> str:
    """``<generated_at compact>-<sha256(data)[:12]>`` (stable for the same file)."""
    digest = hashlib.sha256(data).hexdigest()[:12]
    raw = document.get("generated_at")
    moment = _parse_generated_at(raw)
    return f"{moment:%Y%m%dT%H%M%SZ}-{digest}"


def _parse_generated_at(raw: object) -> datetime:
    if isinstance(raw, str):
        try:
            parsed = datetime.fromisoformat(raw.replace("Z", "+00:00"))
        except ValueError:
            parsed = None
        if parsed is not None:
            if parsed.tzinfo is None:
                parsed = parsed.replace(tzinfo=UTC)
            return parsed.astimezone(UTC)
    # A file without a usable timestamp still gets a stable id (epoch 0 sorts first).
    return datetime(1970, 1, 1, tzinfo=UTC)


def tables_from_document(
    document: Mapping[str, Any], run_id: str, *, shown: str = "evaluation.json"
) -> dict[str, pl.DataFrame]:
    """Every table of the run store rebuilt from one evaluation.json object.

    The artifact reader (:func:`taguru_eval.artifact.tables_from_artifact`)
    does the work, so an imported run and a read-back run are the same frames.
    A case block missing a required part is an :class:`InputError` (its words).
    """
    loaded = tables_from_artifact(document, run_id, label=shown)
    return {**loaded.tables.frames(), **loaded.scores.frames()}


def ingest(path: str | Path, store_dir: str | Path = DEFAULT_STORE_DIR) -> IngestResult:
    """Import one evaluation.json into the run store (idempotent).

    The file is validated with compare's reader (the same rules taguru's own
    reader applies) before anything is written. Raises :class:`InputError`
    for an unreadable or malformed file, :class:`RunError` if the store
    cannot be written.
    """
    shown = str(path)
    data, where = codec.read_bytes(path)
    view = decode_view(data, where, label=os.fspath(path), stamp_required=True)
    document = codec.parse_artifact(data.decode("utf-8"), shown)
    context = view.context
    if not context:
        raise InputError(
            f"{shown}: inputs.context is missing; the run store needs a context",
            path=shown,
            field="inputs.context",
        )
    run_id = derive_run_id(document, data)
    existing = _stored_copy(store_dir, context, data)
    if existing is not None:
        return IngestResult(context, existing.name.removeprefix("run="), existing, created=False)
    frames = tables_from_document(document, run_id, shown=shown)
    text = data.decode("utf-8")
    written = write_run(
        store_dir,
        context,
        run_id,
        frames,
        text,
        origin=RunOrigin("ingest", source=shown),
        # The imported run keeps the cases columns its own catalog has (answers,
        # stability), which compare and the report read back from the store.
        catalog=artifact_catalog(document),
    )
    return IngestResult(context, run_id, written, created=True)


def _stored_copy(store_dir: str | Path, context: str, data: bytes) -> Path | None:
    """The run directory already holding these exact evaluation.json bytes, if any."""
    for directory in stored_runs(context_dir(store_dir, context), "run=*"):
        try:
            if same_bytes(stored_artifact(directory), data):
                return directory
        except OSError:
            continue
    return None

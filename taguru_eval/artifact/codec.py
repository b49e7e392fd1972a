"""The evaluation.json codec: what every reader of one checks, written once.

Every reader — ``load_run`` and ``export`` (:func:`read_artifact`), compare
(``compare.load``'s typed view of the same bytes), ``report`` and ``ingest``
(both: the view validates, the document is what they show and store) — takes
the file's bytes, their UTF-8, the JSON object and its ``taguru_evaluation``
stamp through here. Each reader keeps its own words for a file it cannot read
(compare says taguru's ``reading <path>``, the others ``cannot read <path>``),
but the stamp is judged by :func:`check_stamp` alone.

A key repeated inside an object compare reads is refused by compare's view
(``compare.repeats``), as taguru's serde structs refuse it (GATE_AND_COMPARE.md
§1.2); the generic document read here keeps the last occurrence, as Python's
``json`` does, since no taguru reader sees that document.
"""

from __future__ import annotations

import codecs
import json
import os
from pathlib import Path
from typing import Any

from taguru_eval._base import jsonstrict
from taguru_eval.errors import InputError, os_error_text
from taguru_eval.store_artifact import (
    artifact_bytes,
    not_a_run_hint,
    stamp_problem,
    stored_artifact,
)


def check_stamp(stamp: int | None, shown: str, *, required: bool = True) -> None:
    """Refuse a ``taguru_evaluation`` stamp this build cannot read (:func:`stamp_problem`).

    ``None`` is a file without an integer stamp: with ``required`` it is
    ``not an evaluation.json``; without (compare, GATE_AND_COMPARE.md §6.2 pins
    it) it reads as 0 and fails the range check with ``got 0``.
    """
    if stamp is None and required:
        raise InputError(
            f"{shown}: not an evaluation.json: missing integer 'taguru_evaluation'",
            path=shown,
            field="taguru_evaluation",
        )
    problem = stamp_problem(0 if stamp is None else stamp)
    if problem is not None:
        raise InputError(f"{shown}: {problem}", path=shown, field="taguru_evaluation")


def is_utf8(data: bytes) -> bool:
    """Whether ``data`` is valid UTF-8 (without copying a large file into a ``str``)."""
    if data.isascii():  # the common case, checked word-at-a-time in C
        return True
    # Incremental so a large file is not copied into one more huge ``str``.
    decoder = codecs.getincrementaldecoder("utf-8")("strict")
    view = memoryview(data)
    chunk = 1 << 24
    try:
        for start in range(0, len(data), chunk):
            decoder.decode(view[start : start + chunk])
        decoder.decode(b"", final=True)
    except UnicodeDecodeError:
        return False
    return True


def read_bytes(source: str | os.PathLike[str]) -> tuple[bytes, str]:
    """The evaluation.json bytes ``source`` names — a file, or a stored run
    directory's (compressed or not) — and the path a message names them by.

    Unreadable or not UTF-8, it is compare's §6.2 ``reading <path>: …`` (taguru's
    words), which report and ingest share, since compare's view validates for them.
    """
    given = os.fspath(source)
    path, shown = Path(given), given
    if path.is_dir():
        path = stored_artifact(path)
        shown = os.path.join(given, path.name)
    try:
        data = artifact_bytes(path)
    except OSError as exc:
        raise InputError(
            f"reading {shown}: {os_error_text(exc)}", path=shown, hint=not_a_run_hint(given)
        ) from None
    if not is_utf8(data):
        raise InputError(f"reading {shown}: stream did not contain valid UTF-8", path=shown)
    return data, shown


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def parse_artifact(text: str, path: str) -> dict[str, Any]:
    """Parse evaluation.json text; every problem is an InputError naming ``path``."""
    try:
        doc = json.loads(text, parse_constant=_reject_constant)
    except json.JSONDecodeError as exc:
        raise InputError(
            f"{path}: line {exc.lineno} column {exc.colno}: not valid JSON: "
            f"{jsonstrict.decode_error_reason(exc)}",
            path=path,
            line=exc.lineno,
        ) from None
    except ValueError as exc:
        raise InputError(f"{path}: not valid JSON: {exc}", path=path) from None
    except RecursionError:
        raise InputError(f"{path}: not valid JSON: recursion limit exceeded", path=path) from None
    if not isinstance(doc, dict):
        raise InputError(f"{path}: not an evaluation.json: expected a JSON object", path=path)
    stamp = doc.get("taguru_evaluation")
    check_stamp(None if isinstance(stamp, bool) or not isinstance(stamp, int) else stamp, path)
    cases = doc.get("cases", [])
    if not isinstance(cases, list) or not all(isinstance(case, dict) for case in cases):
        raise InputError(f"{path}: 'cases' must be an array of objects", path=path, field="cases")
    return doc


def read_artifact(path: str | Path) -> dict[str, Any]:
    """Read an evaluation.json file (strict JSON, stamp checked); a stored
    run's compressed copy reads as the bytes it holds."""
    shown = str(path)
    try:
        text = artifact_bytes(path).decode("utf-8")
    except OSError as exc:
        raise InputError(f"cannot read {shown}: {os_error_text(exc)}", path=shown) from None
    except UnicodeDecodeError as exc:
        raise InputError(f"cannot read {shown}: invalid UTF-8 ({exc.reason})", path=shown) from None
    return parse_artifact(text, shown)

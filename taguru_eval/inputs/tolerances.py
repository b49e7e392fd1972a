"""The tolerances file (``compare --tolerances FILE``): how big a regression does not matter.

``compare --significance`` calls a metric whose move is not significant
``inconclusive`` when its confidence interval still reaches further than the
metric's tolerance in the worse direction (:mod:`taguru_eval.compare.significance`).
The tolerances are the team's, kept in version control beside the thresholds:

    {"taguru_eval_tolerances": 1, "tolerance": {"recall.recall_at_k": 0.02}}

They live in a file of their own because the thresholds file cannot carry
them: taguru's evaluate rejects any key it does not know, at the top level,
in ``cases`` and in a bound (GATE_AND_COMPARE.md §4.2), so a thresholds file
holding a tolerance would stop gating under taguru (and under run mode here,
which reads it the same way).

Decoding is strict as the thresholds file's is: unknown or repeated keys are
errors (a metric given twice in ``tolerance`` too: which one was meant?), the
stamp must be 1, every value a JSON number. Then every semantic problem (an
unknown metric name, a negative or non-finite tolerance) is reported together
in one ``<path>: p1; p2`` message. Every failure is an
:class:`~taguru_eval.errors.InputError` (exit 2).
"""

from __future__ import annotations

import math
import os
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Final

from taguru_eval._base import jsonstrict
from taguru_eval._base.filebytes import file_bytes
from taguru_eval._base.jsonstrict import JsonShapeError, JsonSyntaxError
from taguru_eval._base.text import display_f64
from taguru_eval.contract import TOLERANCES_CAP
from taguru_eval.errors import InputError, os_error_text

TOLERANCES_VERSION: Final = 1
STAMP_KEY: Final = "taguru_eval_tolerances"
TOLERANCE_KEY: Final = "tolerance"
_TOP_LEVEL_KEYS: Final = (STAMP_KEY, TOLERANCE_KEY)


def tolerance_problem(delta: float) -> str | None:
    """Why ``delta`` cannot be a tolerance, or ``None``: it is the size of a
    regression that does not matter, a finite number of at least 0."""
    if not math.isfinite(delta) or delta < 0.0:
        return f"{display_f64(delta)} must be a finite number >= 0 (a regression's size)"
    return None


def load_tolerances(path: str | Path, metrics: Collection[str]) -> dict[str, float]:
    """Read and validate a tolerances file; ``metrics`` are the names compare tests.

    Returns metric -> tolerance in the file's order. ``path`` is echoed in
    messages exactly as given. Raises :class:`InputError` (exit 2).
    """
    shown = path if isinstance(path, str) else os.fspath(path)
    try:
        raw = file_bytes(path, TOLERANCES_CAP)
    except OSError as exc:
        raise InputError(f"cannot read {shown}: {os_error_text(exc)}", path=shown) from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(
            f"{shown}: not valid UTF-8 (invalid byte at offset {exc.start})", path=shown
        ) from None
    try:
        document = jsonstrict.loads(text)
        top = jsonstrict.read_closed_object(
            document, (), _TOP_LEVEL_KEYS, required=_TOP_LEVEL_KEYS, reject_duplicates=True
        )
        stamp = jsonstrict.read_u64(top[STAMP_KEY], (STAMP_KEY,))
        tolerances = jsonstrict.read_map(
            top[TOLERANCE_KEY], (TOLERANCE_KEY,), jsonstrict.read_f64, reject_duplicates=True
        )
    except JsonSyntaxError as exc:
        hint = jsonstrict.BOM_HINT if text.startswith(jsonstrict.BOM) else None
        raise InputError(f"{shown}: {exc}", path=shown, hint=hint) from None
    except JsonShapeError as exc:
        raise InputError(f"{shown}: {exc.detail}", path=shown, field=exc.field) from None
    if stamp != TOLERANCES_VERSION:
        raise InputError(
            f"{shown}: {STAMP_KEY} must be {TOLERANCES_VERSION}, got {stamp}",
            path=shown,
            field=STAMP_KEY,
        )
    problems = _problems(tolerances, metrics)
    if problems:
        raise InputError(f"{shown}: {'; '.join(problems)}", path=shown, field=TOLERANCE_KEY)
    return tolerances


def _problems(tolerances: Mapping[str, float], metrics: Collection[str]) -> list[str]:
    known = frozenset(metrics)
    problems = [
        f"{TOLERANCE_KEY}: unknown metric name '{name}' (compare tests {', '.join(metrics)})"
        for name in tolerances
        if name not in known
    ]
    for name, delta in tolerances.items():
        problem = tolerance_problem(delta)
        if problem is not None:
            problems.append(f"{TOLERANCE_KEY}: '{name}': {problem}")
    return problems

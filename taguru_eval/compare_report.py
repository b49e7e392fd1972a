"""Rendering a :class:`~taguru_eval.compare_classify.Comparison`.

changes.jsonl (GATE_AND_COMPARE.md §6.9, bytes per §1.3): compact JSON lines,
non-ASCII raw, floats in shortest round-trip form and always with a fraction
or exponent (``3.0``), a non-finite number as ``null``; header first, then one
line per changed case in ascending case_id byte order; ``\\n`` after every
line. The terminal summary is §6.10.
"""

from __future__ import annotations

import json
import math
import os
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Final

from taguru_eval.catalog import COMPARISON_METRICS
from taguru_eval.compare_classify import (
    NOT_COMPARABLE,
    REGRESSED,
    base_column,
    delta_column,
    direction_column,
    head_column,
)
from taguru_eval.files import write_bytes_atomic

if TYPE_CHECKING:
    from taguru_eval.compare_classify import Comparison

CHANGES_VERSION: Final = 1
"""``taguru_evaluation_changes`` written in the header."""

SUMMARY_REGRESSED_LIMIT: Final = 10
"""How many regressed records the terminal summary names (§6.10)."""

_METRIC_KEYS: Final = {name: json.dumps(name, ensure_ascii=False) for name in COMPARISON_METRICS}


def utc_now() -> str:
    """The compare time as the header writes it: UTC, whole seconds."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _number(value: float | None) -> str:
    """A JSON number the way serde_json writes an f64 (non-finite -> null)."""
    if value is None or not math.isfinite(value):
        return "null"
    return repr(float(value))


def _finite_or_none(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None


_ENCODER: Final = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def _dumps(value: object) -> str:
    """Compact JSON, non-ASCII raw, control characters escaped (§1.3)."""
    return _ENCODER.encode(value)


def header(comparison: Comparison, generated_at: str | None = None) -> dict[str, object]:
    """The header object, keys in §6.9 order."""
    metrics = [
        {
            "metric": name,
            "statistic": statistic,
            "sides": {"base": _finite_or_none(b), "head": _finite_or_none(h)},
            "delta": _finite_or_none(delta),
        }
        for name, statistic, b, h, delta in comparison.metrics.iter_rows()
    ]
    counts = comparison.counts
    doc: dict[str, object] = {
        "kind": "header",
        "taguru_evaluation_changes": CHANGES_VERSION,
        "generated_at": utc_now() if generated_at is None else generated_at,
        "base": comparison.base.identity(),
        "head": comparison.head.identity(),
        "counts": {
            key: counts[key]
            for key in (
                "improved",
                "regressed",
                "added",
                "removed",
                "unchanged",
                "cases_base",
                "cases_head",
            )
        },
        "metrics": metrics,
    }
    if comparison.warnings:
        doc["warnings"] = list(comparison.warnings)
    return doc


def _record_lines(comparison: Comparison) -> list[str]:
    """One compact JSON line per changed case, built from whole columns.

    Hand-assembled rather than ``json.dumps`` per record: the metric names
    are fixed ASCII, the numbers follow :func:`_number`, and only the
    case_id needs escaping — this is the hot path of a 100,000-case compare.
    """
    changed = comparison.changed()
    ids = changed.get_column("case_id").to_list()
    kinds = changed.get_column("kind").to_list()
    columns = [
        (
            _METRIC_KEYS[metric],
            changed.get_column(base_column(metric)).to_list(),
            changed.get_column(head_column(metric)).to_list(),
            changed.get_column(delta_column(metric)).to_list(),
            changed.get_column(direction_column(metric)).to_list(),
        )
        for metric in COMPARISON_METRICS
    ]
    number = _number
    dumps = _dumps
    lines: list[str] = []
    append = lines.append
    for row, (case_id, kind) in enumerate(zip(ids, kinds, strict=True)):
        entries = []
        for key, bases, heads, deltas, directions in columns:
            direction = directions[row]
            if direction is None:
                continue
            delta = "null" if direction == NOT_COMPARABLE else number(deltas[row])
            entries.append(
                f'{{"metric":{key},"sides":{{"base":{number(bases[row])},'
                f'"head":{number(heads[row])}}},"delta":{delta},'
                f'"direction":"{direction}"}}'
            )
        append(f'{{"kind":"{kind}","case_id":{dumps(case_id)},"metrics":[{",".join(entries)}]}}')
    return lines


def records(comparison: Comparison) -> list[dict[str, object]]:
    """The per-case lines as Python objects (parsed from the same rendering)."""
    parsed: list[dict[str, object]] = [json.loads(line) for line in _record_lines(comparison)]
    return parsed


def render_changes(comparison: Comparison, generated_at: str | None = None) -> str:
    """The whole changes.jsonl text, ``\\n`` after every line."""
    lines = [_dumps(header(comparison, generated_at)), *_record_lines(comparison)]
    return "\n".join(lines) + "\n"


def write_atomically(path: str | os.PathLike[str], text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` through a temp file in the same
    directory and a rename; on failure nothing is left behind and the
    ``OSError`` propagates. A missing directory is not created (§1.3)."""
    write_bytes_atomic(path, text.encode("utf-8"))


def _fixed3(value: float) -> str:
    return f"{value:.3f}"


def summary(comparison: Comparison, out: str) -> str:
    """The stdout summary after a successful write (§6.10), newline-terminated."""
    counts = comparison.counts
    lines = [
        f"evaluate compare: {counts['cases_base']} case(s) in BASE, {counts['cases_head']} "
        f"in HEAD — {counts['improved']} improved, {counts['regressed']} regressed, "
        f"{counts['added']} added, {counts['removed']} removed, "
        f"{counts['unchanged']} unchanged"
    ]
    if comparison.metrics.height:
        lines.append("  aggregate:")
        for name, _statistic, b, h, delta in comparison.metrics.iter_rows():
            if b is not None and h is not None:
                lines.append(f"    {name}: {_fixed3(b)} -> {_fixed3(h)} (Δ {delta:+.3f})")
            elif b is not None:
                lines.append(f"    {name}: {_fixed3(b)} -> n/a")
            elif h is not None:
                lines.append(f"    {name}: n/a -> {_fixed3(h)}")
    regressed = comparison.regressed()
    for row in regressed.head(SUMMARY_REGRESSED_LIMIT).iter_rows(named=True):
        parts = [
            f"{metric} {row[delta_column(metric)]:+.3f}"
            for metric in COMPARISON_METRICS
            if row[direction_column(metric)] == REGRESSED
        ]
        lines.append(f"    regressed: {row['case_id']} ({', '.join(parts)})")
    if regressed.height > SUMMARY_REGRESSED_LIMIT:
        lines.append(
            f"    ... and {regressed.height - SUMMARY_REGRESSED_LIMIT} more regressed case(s)"
        )
    lines.append(f"  wrote {out}")
    return "\n".join(lines) + "\n"

"""The thresholds file (``--thresholds FILE``): decoding, validation, identity.

GATE_AND_COMPARE.md §4 in order:

1. read the raw bytes (``cannot read <path>: …``);
2. decode them as strict JSON into fixed-shape objects (§4.2, §1.2): unknown
   or repeated keys in the top level, in ``cases`` and in a Bound are errors,
   while a repeated key in a free-keyed map (metric names, case ids) keeps its
   last value; decoding stops at the first error (``<path>: <detail>``);
3. the stamp must equal 1 (§4.3), checked before any semantic problem;
4. every semantic problem (§4.4) is collected, in the spec's order, and
   reported together in one ``<path>: p1; p2; …`` message;
5. the identity is the SHA-256 of the raw bytes (§4.6).

Every failure is an :class:`~taguru_eval.errors.InputError` (exit 2). The
bounds are exposed as Polars frames so the gate (``taguru_eval.gate``) checks
a whole run with joins rather than loops.
"""

from __future__ import annotations

import hashlib
import math
import os
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

import polars as pl

from taguru_eval._base import jsonstrict
from taguru_eval._base.filebytes import file_bytes
from taguru_eval._base.jsonstrict import JsonPath, JsonShapeError, JsonSyntaxError
from taguru_eval._base.suggest import did_you_mean
from taguru_eval._base.text import display_f64
from taguru_eval.catalog import (
    ABSTENTION_METRICS,
    ANSWERS_METRICS,
    CASE_SCOPED_METRICS,
    CATALOG_KEYS,
    STABILITY_METRICS,
)
from taguru_eval.contract import THRESHOLDS_CAP
from taguru_eval.errors import InputError, os_error_text

THRESHOLDS_VERSION: Final = 1
"""The only accepted ``taguru_evaluate_thresholds`` stamp (equality, §4.3)."""

STAMP_KEY: Final = "taguru_evaluate_thresholds"
_TOP_LEVEL_KEYS: Final = (STAMP_KEY, "aggregate", "cases", "allow_unstable_corpus")
_CASES_KEYS: Final = ("default", "overrides")
_BOUND_KEYS: Final = ("min", "max")
_UTF8_BOM: Final = b"\xef\xbb\xbf"
_CASE_SCOPED: Final = frozenset(CASE_SCOPED_METRICS)

MUST_REFUSE_FLAG: Final = "--must-refuse"
ANSWERS_FLAG: Final = "--answers"
REPEAT_FLAG: Final = "--repeat"
"""The flag that adds the abstention metrics to a run's catalog (ABSTENTION.md §3.9)."""

AGGREGATE_BOUNDS_SCHEMA: Final = {"metric": pl.String, "bound": pl.String, "threshold": pl.Float64}
"""One row per present side of an aggregate bound; ``bound`` is ``"min"`` or ``"max"``."""

CASE_BOUNDS_SCHEMA: Final = {
    "case_id": pl.String,
    "metric": pl.String,
    "bound": pl.String,
    "threshold": pl.Float64,
}
"""One row per present side of a case bound after the default + override merge."""


@dataclass(frozen=True)
class Bound:
    """An inclusive ``min``/``max`` pair; ``None`` means that side is absent."""

    min: float | None = None
    max: float | None = None

    def rows(self) -> list[tuple[str, float]]:
        """The present sides as ``(bound, threshold)``, ``min`` first."""
        sides = (("min", self.min), ("max", self.max))
        return [(name, value) for name, value in sides if value is not None]


@dataclass(frozen=True)
class Thresholds:
    """A decoded thresholds file. Maps are sorted by key (ascending byte order)."""

    sha256: str
    aggregate: Mapping[str, Bound] = field(default_factory=dict)
    case_default: Mapping[str, Bound] = field(default_factory=dict)
    case_overrides: Mapping[str, Mapping[str, Bound]] = field(default_factory=dict)
    allow_unstable_corpus: bool = False
    stamp: int = THRESHOLDS_VERSION

    @property
    def aggregate_bounds(self) -> pl.DataFrame:
        """Aggregate bounds as ``metric, bound, threshold`` rows (metric order)."""
        rows = [
            (metric, side, threshold)
            for metric, bound in sorted(self.aggregate.items())
            for side, threshold in bound.rows()
        ]
        return pl.DataFrame(rows, schema=AGGREGATE_BOUNDS_SCHEMA, orient="row")

    def case_bounds(self, case_ids: Sequence[str]) -> pl.DataFrame:
        """Per-case bounds for the run's cases: ``case_id, metric, bound, threshold``.

        ``cases.default`` applies to every case; an override for a case replaces
        the default's bound for that metric wholesale (no field-level merge —
        default ``{min, max}`` overridden by ``{min}`` leaves no max) and adds
        the metrics only it names (§5.3). Overrides for case ids that are not
        in ``case_ids`` are dropped. Rows come in ``case_ids`` order, then
        metric-name order, ``min`` before ``max``.
        """
        cases = pl.DataFrame({"case_id": list(case_ids)}, schema={"case_id": pl.String})
        cases = cases.with_row_index("case_index")
        defaults = pl.DataFrame(
            [
                (metric, side, threshold)
                for metric, bound in self.case_default.items()
                for side, threshold in bound.rows()
            ],
            schema=AGGREGATE_BOUNDS_SCHEMA,
            orient="row",
        )
        overrides = pl.DataFrame(
            [
                (case_id, metric, side, threshold)
                for case_id, bounds in self.case_overrides.items()
                for metric, bound in bounds.items()
                for side, threshold in bound.rows()
            ],
            schema=CASE_BOUNDS_SCHEMA,
            orient="row",
        )
        replaced = overrides.select("case_id", "metric").unique()
        from_default = cases.join(defaults, how="cross").join(
            replaced, on=["case_id", "metric"], how="anti"
        )
        from_override = cases.join(overrides, on="case_id", how="inner")
        merged = pl.concat(
            [from_default.select(from_override.columns), from_override], how="vertical"
        )
        return merged.sort(
            "case_index", "metric", pl.col("bound") == "max", maintain_order=True
        ).select(list(CASE_BOUNDS_SCHEMA))


def sha256_hex(raw: bytes) -> str:
    """Lower-case hex SHA-256 of ``raw`` — the threshold identity (§4.6)."""
    return hashlib.sha256(raw).hexdigest()


def bound_problem(bound: Bound) -> str | None:
    """The first problem of one bound (§4.4 step 4), without its scope, or ``None``."""
    if bound.min is None and bound.max is None:
        return "needs at least one of min/max"
    if bound.min is not None and not math.isfinite(bound.min):
        return f"min {display_f64(bound.min)} must be finite"
    if bound.max is not None and not math.isfinite(bound.max):
        return f"max {display_f64(bound.max)} must be finite"
    if bound.min is not None and bound.max is not None and bound.min > bound.max:
        return f"min {display_f64(bound.min)} must be <= max {display_f64(bound.max)}"
    return None


def load_thresholds(
    path: str | Path,
    catalog_keys: Collection[str],
    case_ids: Collection[str] | None,
    *,
    needs_flag: Mapping[str, str] | None = None,
) -> Thresholds:
    """Read, decode and fully validate a thresholds file (GATE_AND_COMPARE.md §4).

    ``catalog_keys`` is the run's metric catalog (the 31 names, plus the
    abstention names with ``--must-refuse``); ``case_ids`` are the loaded
    eval.jsonl case ids (``None``: there is no eval set to hold the overrides'
    case ids against, and they are not checked). ``needs_flag`` maps a metric
    name this run does not measure to the flag that would add it (ABSTENTION.md
    §3.9: bounding an abstention metric without ``--must-refuse`` is a bad flag,
    said so).
    ``path`` is echoed in messages exactly as given. Raises
    :class:`InputError` (exit 2) on any problem.
    """
    shown = path if isinstance(path, str) else os.fspath(path)
    try:
        raw = file_bytes(path, THRESHOLDS_CAP)
    except OSError as exc:
        raise _error(f"cannot read {shown}: {os_error_text(exc)}", shown) from None
    thresholds = parse_thresholds(raw, shown)
    validate_thresholds(thresholds, shown, catalog_keys, case_ids, needs_flag=needs_flag)
    return thresholds


def load_run_thresholds(
    path: str | Path,
    case_ids: Collection[str] | None,
    *,
    must_refuse: bool = False,
    answers: bool = False,
    repeat: bool = False,
) -> Thresholds:
    """A thresholds file checked against one run's catalog and case ids (§2.3 step 5).

    The catalog is the 31 metric names, plus the abstention names when the run
    was given ``--must-refuse``, the ``answers.*`` names with ``--answers`` and
    ``stability.unstable_rate`` with ``--repeat`` N > 1.
    Without the flag a bound on one of its metrics is a problem naming the
    flag (exit 2 before any network call, ABSTENTION.md §3.9), not a late "no
    samples". Run mode and ``report --thresholds`` both read the file through
    here, so a file is accepted or refused by both with the same message.
    """
    keys = set(CATALOG_KEYS)
    needs_flag: dict[str, str] = {}
    for wanted, metrics, flag in (
        (must_refuse, ABSTENTION_METRICS, MUST_REFUSE_FLAG),
        (answers, ANSWERS_METRICS, ANSWERS_FLAG),
        (repeat, STABILITY_METRICS, REPEAT_FLAG),
    ):
        if wanted:
            keys.update(metrics)
        else:
            needs_flag.update(dict.fromkeys(metrics, flag))
    return load_thresholds(path, frozenset(keys), case_ids, needs_flag=needs_flag or None)


def parse_thresholds(raw: bytes, path: str) -> Thresholds:
    """Decode a thresholds file's bytes and check its stamp (§4.2, §4.3).

    Semantic checks against a catalog and case ids are :func:`validate_thresholds`.
    """
    text = _decode_utf8(raw, path)
    try:
        document = jsonstrict.loads(text)
    except JsonSyntaxError as exc:
        raise _error(f"{path}: {exc}", path) from None
    try:
        thresholds = _read_document(document, sha256_hex(raw))
    except JsonShapeError as exc:
        raise _error(f"{path}: {exc.detail}", path, field=exc.field) from None
    if thresholds.stamp != THRESHOLDS_VERSION:
        raise _error(
            f"{path}: {STAMP_KEY} must be {THRESHOLDS_VERSION}, got {thresholds.stamp}",
            path,
            field=STAMP_KEY,
        )
    return thresholds


def validate_thresholds(
    thresholds: Thresholds,
    path: str,
    catalog_keys: Collection[str],
    case_ids: Collection[str] | None,
    *,
    needs_flag: Mapping[str, str] | None = None,
) -> None:
    """Raise one :class:`InputError` listing every §4.4 problem, or return."""
    problems = semantic_problems(thresholds, catalog_keys, case_ids, needs_flag=needs_flag)
    if problems:
        error = _error(f"{path}: {'; '.join(problems)}", path)
        hint = name_hints(thresholds, catalog_keys, needs_flag or {})
        if hint:
            error.add_hint(hint)
        raise error


def name_hints(
    thresholds: Thresholds, catalog_keys: Collection[str], needs_flag: Mapping[str, str]
) -> str | None:
    """``'recall@k': did you mean 'recall.recall_at_k'?`` for each metric name the
    run does not know (the closest names of the run's catalog; per-case bounds
    take only the case-scoped names), or ``None``."""
    scoped: list[tuple[Mapping[str, Bound], Collection[str]]] = [
        (thresholds.aggregate, catalog_keys),
        (thresholds.case_default, _CASE_SCOPED),
        *((bounds, _CASE_SCOPED) for bounds in thresholds.case_overrides.values()),
    ]
    hints: dict[str, str] = {}
    for bounds, known in scoped:
        for name in sorted(bounds):
            if name in known or name in needs_flag or name in hints:
                continue
            suggestion = did_you_mean(name, sorted(known))
            if suggestion is not None:
                hints[name] = f"'{name}': {suggestion}"
    return "; ".join(hints.values()) or None


def semantic_problems(
    thresholds: Thresholds,
    catalog_keys: Collection[str],
    case_ids: Collection[str] | None,
    *,
    needs_flag: Mapping[str, str] | None = None,
) -> list[str]:
    """Every §4.4 problem, in the spec's order (names, then bounds)."""
    known_metrics = frozenset(catalog_keys)
    known_cases = None if case_ids is None else frozenset(case_ids)
    flagged = needs_flag or {}
    problems: list[str] = []
    for name in sorted(thresholds.aggregate):
        if name in known_metrics:
            continue
        if name in flagged:
            problems.append(
                f"aggregate: metric name '{name}' is measured only with {flagged[name]}"
            )
        else:
            problems.append(f"aggregate: unknown metric name '{name}'")
    for name in sorted(thresholds.case_default):
        if name not in _CASE_SCOPED:
            problems.append(f"cases.default: unknown (or not case-scoped) metric name '{name}'")
    for case_id in sorted(thresholds.case_overrides):
        if known_cases is not None and case_id not in known_cases:
            problems.append(f"cases.overrides: unknown case_id '{case_id}'")
        for name in sorted(thresholds.case_overrides[case_id]):
            if name not in _CASE_SCOPED:
                problems.append(
                    f"cases.overrides.{case_id}: unknown (or not case-scoped) metric name '{name}'"
                )
    scoped: list[tuple[str, Mapping[str, Bound]]] = [
        ("aggregate", thresholds.aggregate),
        ("cases.default", thresholds.case_default),
    ]
    scoped.extend(
        (f"cases.overrides.{case_id}", thresholds.case_overrides[case_id])
        for case_id in sorted(thresholds.case_overrides)
    )
    for scope, bounds in scoped:
        for name in sorted(bounds):
            problem = bound_problem(bounds[name])
            if problem is not None:
                problems.append(f"{scope}: '{name}': {problem}")
    return problems


# --------------------------------------------------------------------------- decoding


def _decode_utf8(raw: bytes, path: str) -> str:
    if raw.startswith(_UTF8_BOM):
        # taguru's words (serde_json sees no JSON value), then the fix.
        error = _error(f"{path}: expected value at line 1 column 1", path)
        error.add_hint(jsonstrict.BOM_HINT)
        raise error
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _error(
            f"{path}: not valid UTF-8 (invalid byte at offset {exc.start})", path
        ) from None


def _read_document(document: object, sha256: str) -> Thresholds:
    top = jsonstrict.read_closed_object(
        document, (), _TOP_LEVEL_KEYS, required=(STAMP_KEY,), reject_duplicates=True
    )
    stamp = jsonstrict.read_u64(top[STAMP_KEY], (STAMP_KEY,))
    aggregate: dict[str, Bound] = {}
    if "aggregate" in top:
        aggregate = jsonstrict.read_map(top["aggregate"], ("aggregate",), _read_bound)
    default: dict[str, Bound] = {}
    overrides: dict[str, dict[str, Bound]] = {}
    if "cases" in top:
        default, overrides = _read_cases(top["cases"], ("cases",))
    allow_unstable = False
    if "allow_unstable_corpus" in top:
        allow_unstable = jsonstrict.read_bool(
            top["allow_unstable_corpus"], ("allow_unstable_corpus",)
        )
    return Thresholds(
        sha256=sha256,
        aggregate=_sorted(aggregate),
        case_default=_sorted(default),
        case_overrides={case_id: _sorted(overrides[case_id]) for case_id in sorted(overrides)},
        allow_unstable_corpus=allow_unstable,
        stamp=stamp,
    )


def _read_cases(
    value: object, path: JsonPath
) -> tuple[dict[str, Bound], dict[str, dict[str, Bound]]]:
    cases = jsonstrict.read_closed_object(value, path, _CASES_KEYS, reject_duplicates=True)
    default: dict[str, Bound] = {}
    if "default" in cases:
        default = jsonstrict.read_map(cases["default"], (*path, "default"), _read_bound)
    overrides: dict[str, dict[str, Bound]] = {}
    if "overrides" in cases:
        overrides = jsonstrict.read_map(cases["overrides"], (*path, "overrides"), _read_bound_map)
    return default, overrides


def _read_bound_map(value: object, path: JsonPath) -> dict[str, Bound]:
    return jsonstrict.read_map(value, path, _read_bound)


def _read_bound(value: object, path: JsonPath) -> Bound:
    members = jsonstrict.read_closed_object(value, path, _BOUND_KEYS, reject_duplicates=True)
    low = members.get("min")
    high = members.get("max")
    # null means absent for min/max (§4.2); the bound's validity is §4.4's job.
    return Bound(
        min=None if low is None else jsonstrict.read_f64(low, (*path, "min")),
        max=None if high is None else jsonstrict.read_f64(high, (*path, "max")),
    )


def _sorted(bounds: Mapping[str, Bound]) -> dict[str, Bound]:
    return {name: bounds[name] for name in sorted(bounds)}


def _error(message: str, path: str, *, field: str | None = None) -> InputError:
    return InputError(message, path=path, field=field)

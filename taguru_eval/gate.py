"""Applying a thresholds file to a finished run (GATE_AND_COMPARE.md §5).

Inputs are frames, as the scorer makes them:

* the run's ``metrics`` table (one row per aggregate metric); the value each
  aggregate bound is compared with is the metric's *scalar* (§2.3): a
  Distribution's ``mean`` (never ``p50``), a Ratio's or Count's ``value``,
  chosen by the row's ``statistic`` (:func:`taguru_eval.catalog.scalar_expr`),
  never guessed from which fields are set;
* a per-case metric frame, the ``case_id, metric, value`` long table described
  by :data:`CASE_VALUES_SCHEMA`: one row per (case, case-scoped metric) the
  case computed, ``value`` a ``Float64`` (latency and ``diversity_sources``
  integers converted). A metric a case did not compute is simply absent (no
  row, or a null ``value``) — it is skipped, never a violation.
  :func:`case_values_from_cases_frame` unpivots the scorer's wide ``cases``
  frame into it; :func:`case_metric_frame` reads it from evaluation.json case
  blocks (a file written by taguru, GATE_AND_COMPARE.md §3 reader side);
* the corpus stability (``revision_before == revision_after``).

Per-case bounds are checked by joining that frame against the merged bounds
frame of :meth:`Thresholds.case_bounds` — one vectorised pass over the run.
The result is a :class:`GateReport`: the verdict, the ``thresholds`` block of
evaluation.json (key order of §5.5, empty ``violations``/``skipped`` omitted),
the stdout lines of §5.6 and the exit code (0 pass, 3 fail).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

import polars as pl

from taguru_eval._base.text import one_line
from taguru_eval.catalog import CATALOG, Catalog, scalar_expr
from taguru_eval.errors import EXIT_GATE, EXIT_OK
from taguru_eval.inputs.thresholds import Thresholds

CASE_VALUES_SCHEMA: Final = {"case_id": pl.String, "metric": pl.String, "value": pl.Float64}
"""The per-case metric frame the gate joins against: long format, one row per value."""

NO_SAMPLES_REASON: Final = "no samples for this metric (n=0)"
UNSTABLE_CORPUS_METRIC: Final = "corpus.stable"
UNSTABLE_CORPUS_REASON: Final = (
    "the context's revision changed during this run "
    "(corpus.revision_before != corpus.revision_after) and allow_unstable_corpus is false"
)
REPORT_ONLY_NOTICE: Final = "no --thresholds given — this run is report-only and always exits 0"
"""stderr body (the CLI adds ``taguru: evaluate: ``) for a run without ``--thresholds``."""

UNSTABLE_CORPUS_WARNING_LINE: Final = (
    "  WARNING: the context's revision changed during this run — a write landed mid-run "
    "(corpus.revision_before != corpus.revision_after)"
)
"""Run-summary stdout line printed whenever the corpus was unstable, gate or not."""

MAX_PRINTED_CASE_VIOLATIONS: Final = 10

MAX_LISTED_OFFENDERS: Final = 10
"""Offending case_ids a violated must-refuse bound names (ABSTENTION.md §3.9)."""

_SCOPE_AGGREGATE: Final = "aggregate"
_SCOPE_CASE: Final = "case"
_SCOPE_CORPUS: Final = "corpus"


@dataclass(frozen=True)
class Violation:
    """One entry of ``thresholds.violations`` (§5.5)."""

    scope: str
    metric: str
    actual: float | None
    reason: str
    case_id: str | None = None
    bound: str | None = None
    threshold: float | None = None

    def to_json(self) -> dict[str, object]:
        """Keys in the spec's order; ``case_id``/``bound``/``threshold`` only when set."""
        out: dict[str, object] = {"scope": self.scope}
        if self.case_id is not None:
            out["case_id"] = self.case_id
        out["metric"] = self.metric
        if self.bound is not None:
            out["bound"] = self.bound
        if self.threshold is not None:
            out["threshold"] = _json_float(self.threshold)
        out["actual"] = None if self.actual is None else _json_float(self.actual)
        out["reason"] = self.reason
        return out


@dataclass(frozen=True)
class FlagGate:
    """A gate ``--must-refuse`` or ``--answers`` brought to a gated run
    (:mod:`taguru_eval.flag_gates`): whose bounds judged it and its verdict.

    ``bounds`` is ``implied`` (the thresholds file bounds none of the flag's
    metrics: the flag's own assertion applies) or ``explicit`` (the file's bounds
    replace it); ``line`` is its stdout line after the gate's."""

    flag: str
    bounds: str
    passed: bool
    line: str = ""

    def to_json(self) -> dict[str, object]:
        """Its entry of ``thresholds.flag_gates``."""
        return {"flag": self.flag, "bounds": self.bounds, "passed": self.passed}


@dataclass(frozen=True)
class GateReport:
    """The gate's verdict on one run.

    ``flag_gates`` is empty unless ``--must-refuse``/``--answers`` was given:
    only then does the ``thresholds`` block gain ``flag_gates`` and stdout a line
    per flag."""

    sha256: str
    allow_unstable_corpus: bool
    violations: tuple[Violation, ...]
    skipped: tuple[str, ...]
    flag_gates: tuple[FlagGate, ...] = ()

    @property
    def passed(self) -> bool:
        """A run passes when nothing was violated; skipped entries never fail it."""
        return not self.violations

    @property
    def exit_code(self) -> int:
        """0 on pass, 3 on a violated gate (exit 3 means nothing else)."""
        return EXIT_OK if self.passed else EXIT_GATE

    @property
    def block(self) -> dict[str, object]:
        """The evaluation.json ``thresholds`` block (§5.5)."""
        out: dict[str, object] = {
            "sha256": self.sha256,
            "passed": self.passed,
            "allow_unstable_corpus": self.allow_unstable_corpus,
        }
        if self.violations:
            out["violations"] = [violation.to_json() for violation in self.violations]
        if self.skipped:
            out["skipped"] = list(self.skipped)
        if self.flag_gates:
            out["flag_gates"] = [gate.to_json() for gate in self.flag_gates]
        return out

    def lines(self) -> list[str]:
        """The stdout lines of §5.6 that follow the run summary."""
        return summary_lines(self)

    @classmethod
    def from_block(cls, block: Mapping[str, Any]) -> GateReport:
        """The verdict an artifact recorded, read back from its ``thresholds`` block
        (the inverse of :attr:`block`; a report over a written run, not a new gate)."""

        def number(value: object) -> float | None:
            return float(value) if isinstance(value, int | float) else None

        def text(value: object) -> str | None:
            return value if isinstance(value, str) else None

        violations = tuple(
            Violation(
                scope=str(entry.get("scope", "")),
                metric=str(entry.get("metric", "")),
                actual=number(entry.get("actual")),
                reason=str(entry.get("reason", "")),
                case_id=text(entry.get("case_id")),
                bound=text(entry.get("bound")),
                threshold=number(entry.get("threshold")),
            )
            for entry in block.get("violations") or ()
            if isinstance(entry, Mapping)
        )
        flag_gates = tuple(
            FlagGate(
                flag=str(entry.get("flag", "")),
                bounds=str(entry.get("bounds", "")),
                passed=entry.get("passed") is True,
            )
            for entry in block.get("flag_gates") or ()
            if isinstance(entry, Mapping)
        )
        if block.get("passed") is False and not violations:
            # A block that says it failed but lists nothing (another writer's
            # shape): keep the verdict rather than turn it into a pass.
            violations = (Violation("aggregate", "thresholds", None, "recorded as failed"),)
        return cls(
            sha256=str(block.get("sha256", "")),
            allow_unstable_corpus=block.get("allow_unstable_corpus") is True,
            violations=violations,
            skipped=tuple(str(item) for item in block.get("skipped") or ()),
            flag_gates=flag_gates,
        )


def evaluate_gate(
    thresholds: Thresholds,
    metrics: pl.DataFrame,
    case_values: pl.DataFrame,
    *,
    stable: bool,
    case_ids: Sequence[str] | None = None,
    reason_suffixes: Mapping[str, str] | None = None,
    members: pl.DataFrame | None = None,
) -> GateReport:
    """Check every bound of ``thresholds`` against one run (§5.1–§5.4).

    ``metrics`` is the run's metrics table (``metric``, ``statistic`` and the
    value columns); ``case_values`` the long per-case frame. ``case_ids`` is
    the run's case order (eval.jsonl order); without it the order of first
    appearance in ``case_values`` is used, so pass it when a case may have no
    row at all. ``reason_suffixes`` appends text after the §5.1 reason of a
    violated min/max aggregate bound, for metrics whose own spec asks for it.
    ``members`` (``metric, case_id, counted``: each case in a ratio's or
    count's denominator and whether it counts toward the numerator) names the
    cases behind a violated bound of those metrics (ABSTENTION.md §3.9): the
    uncounted ones under a ``min``, the counted ones under a ``max``, at most
    :data:`MAX_LISTED_OFFENDERS` and a count of the rest.
    """
    aggregate = _aggregate_violations(thresholds, metrics, reason_suffixes or {}, members)
    typed = _typed_case_values(case_values)
    order = (
        list(case_ids)
        if case_ids is not None
        else typed.get_column("case_id").unique(maintain_order=True).to_list()
    )
    values = (
        typed.filter(pl.col("value").is_not_null())
        # One value per (case, metric); the last row wins if a producer repeated one.
        .unique(subset=["case_id", "metric"], keep="last", maintain_order=True)
    )
    case_violations, skipped = _case_checks(thresholds.case_bounds(order), values)
    violations = [*aggregate, *case_violations]
    if not stable and not thresholds.allow_unstable_corpus:
        violations.append(
            Violation(
                scope=_SCOPE_CORPUS,
                metric=UNSTABLE_CORPUS_METRIC,
                actual=None,
                reason=UNSTABLE_CORPUS_REASON,
            )
        )
    return GateReport(
        sha256=thresholds.sha256,
        allow_unstable_corpus=thresholds.allow_unstable_corpus,
        violations=tuple(violations),
        skipped=tuple(skipped),
    )


def summary_lines(report: GateReport) -> list[str]:
    """``  thresholds: PASS …`` or the FAIL block of §5.6, one string per line."""
    digest = f"sha256 {report.sha256[:12]}…"
    if report.passed:
        return [
            f"  thresholds: PASS ({digest})",
            *(one_line(gate.line) for gate in report.flag_gates if gate.line),
        ]
    lines = [f"  thresholds: FAIL — {len(report.violations)} violation(s) ({digest})"]
    case_violations = [v for v in report.violations if v.scope == _SCOPE_CASE]
    lines.extend(
        f"    [{v.scope}] {v.metric}: {v.reason}"
        for v in report.violations
        if v.scope != _SCOPE_CASE
    )
    lines.extend(
        f"    [case {v.case_id}] {v.metric}: {v.reason}"
        for v in case_violations[:MAX_PRINTED_CASE_VIOLATIONS]
    )
    hidden = len(case_violations) - MAX_PRINTED_CASE_VIOLATIONS
    if hidden > 0:
        lines.append(f"    ... and {hidden} more case-scoped violation(s)")
    if report.skipped:
        lines.append(f"  {len(report.skipped)} case-scoped threshold(s) skipped as not applicable")
    lines.extend(gate.line for gate in report.flag_gates if gate.line)
    # A case_id (and an abstention reason's case list) is the user's text: a
    # control character in it must not colour the terminal or forge a line.
    # Every other line keeps §5.6's bytes.
    return [one_line(line) for line in lines]


def case_metric_frame(
    cases: Sequence[Mapping[str, Any]], catalog: Catalog = CATALOG
) -> pl.DataFrame:
    """The per-case metric frame from evaluation.json case blocks (§3).

    Reader-side rules: a missing or ``null`` link anywhere on a value's path
    makes it absent (no row). Rows come in case order, then in the fixed
    case-scoped order.
    """
    paths = {metric: catalog.per_case[metric].path for metric in catalog.case_scoped}
    rows: list[tuple[str, str, float]] = []
    for case in cases:
        case_id = case.get("case_id")
        if not isinstance(case_id, str):
            continue
        for metric, path in paths.items():
            value = _follow(case, path)
            if value is not None:
                rows.append((case_id, metric, value))
    return pl.DataFrame(rows, schema=CASE_VALUES_SCHEMA, orient="row")


def case_values_from_cases_frame(cases: pl.DataFrame, catalog: Catalog = CATALOG) -> pl.DataFrame:
    """The gate's long per-case frame from the score module's wide ``cases`` frame.

    One ``unpivot`` of the case-scoped columns; nulls (a metric the case did
    not compute) are dropped, so they end up skipped, never violated.
    """
    return (
        cases.select(
            pl.col("case_id").cast(pl.String),
            *(
                pl.col(catalog.per_case[metric].column).cast(pl.Float64).alias(metric)
                for metric in catalog.case_scoped
            ),
        )
        .unpivot(index="case_id", variable_name="metric", value_name="value")
        .filter(pl.col("value").is_not_null())
        .select(list(CASE_VALUES_SCHEMA))
    )


# --------------------------------------------------------------------------- internals


def _follow(block: Mapping[str, Any], path: Sequence[str]) -> float | None:
    current: object = block
    for key in path:
        if not isinstance(current, Mapping):
            return None
        current = current.get(key)
    if isinstance(current, bool) or not isinstance(current, int | float):
        return None
    return float(current)


def offenders_suffix(members: pl.DataFrame, metric: str, bound: str) -> str:
    """The case list appended to a violated bound's reason (ABSTENTION.md §3.9):
    ``" — cases: a, b (and 3 more)"``; empty when no case is behind it."""
    offending = members.filter(
        (pl.col("metric") == metric) & (pl.col("counted") == (bound == "max"))
    ).get_column("case_id")
    if offending.len() == 0:
        return ""
    shown = ", ".join(offending.head(MAX_LISTED_OFFENDERS).to_list())
    rest = offending.len() - MAX_LISTED_OFFENDERS
    return f" — cases: {shown}" + (f" (and {rest} more)" if rest > 0 else "")


def _aggregate_violations(
    thresholds: Thresholds,
    metrics: pl.DataFrame,
    reason_suffixes: Mapping[str, str],
    members: pl.DataFrame | None,
) -> list[Violation]:
    bounds = thresholds.aggregate_bounds
    names = sorted(thresholds.aggregate)
    scalars = pl.DataFrame({"metric": names}, schema={"metric": pl.String}).join(
        metrics.select(pl.col("metric"), scalar_expr().alias("actual")).unique(
            "metric", keep="last"
        ),
        on="metric",
        how="left",
    )
    checked = bounds.join(scalars, on="metric", how="left")
    missing = set(scalars.filter(pl.col("actual").is_null()).get_column("metric").to_list())
    breaches = {
        row["metric"]: row for row in _first_breach(checked, ["metric"]).iter_rows(named=True)
    }
    violations: list[Violation] = []
    # One entry per bounded metric at most, in metric-name order (§5.2).
    for name in names:
        if name in missing:
            violations.append(
                Violation(
                    scope=_SCOPE_AGGREGATE, metric=name, actual=None, reason=NO_SAMPLES_REASON
                )
            )
        elif name in breaches:
            row = breaches[name]
            reason = bound_reason(row["actual"], row["bound"], row["threshold"])
            suffix = reason_suffixes.get(name)
            if suffix is None and members is not None:
                suffix = offenders_suffix(members, name, row["bound"])
            violations.append(
                Violation(
                    scope=_SCOPE_AGGREGATE,
                    metric=name,
                    bound=row["bound"],
                    threshold=row["threshold"],
                    actual=row["actual"],
                    reason=reason + suffix if suffix else reason,
                )
            )
    return violations


def _typed_case_values(case_values: pl.DataFrame) -> pl.DataFrame:
    missing = [name for name in CASE_VALUES_SCHEMA if name not in case_values.columns]
    if missing:
        raise ValueError(f"per-case metric frame lacks column(s) {missing}")
    return case_values.select(
        pl.col(name).cast(dtype) for name, dtype in CASE_VALUES_SCHEMA.items()
    )


def _case_checks(
    case_bounds: pl.DataFrame, values: pl.DataFrame
) -> tuple[list[Violation], list[str]]:
    order = case_bounds.select("case_id").unique(maintain_order=True).with_row_index("case_index")
    checked = case_bounds.join(
        values.rename({"value": "actual"}), on=["case_id", "metric"], how="left"
    ).join(order, on="case_id", how="left")
    skipped_rows = (
        checked.filter(pl.col("actual").is_null())
        .select("case_index", "case_id", "metric")
        .unique()
        .sort("case_index", "metric")
    )
    skipped = [
        skip_reason(case_id, metric)
        for case_id, metric in skipped_rows.select("case_id", "metric").iter_rows()
    ]
    breaches = _first_breach(checked, ["case_id", "metric"]).sort("case_index", "metric")
    violations = [
        Violation(
            scope=_SCOPE_CASE,
            case_id=row["case_id"],
            metric=row["metric"],
            bound=row["bound"],
            threshold=row["threshold"],
            actual=row["actual"],
            reason=bound_reason(row["actual"], row["bound"], row["threshold"]),
        )
        for row in breaches.iter_rows(named=True)
    ]
    return violations, skipped


def skip_reason(case_id: str, metric: str) -> str:
    """The ``skipped`` entry of a per-case bound whose metric the case did not compute."""
    return (
        f"case '{case_id}': '{metric}' not applicable — the case did not declare the "
        "matching expectation, or its lane did not complete"
    )


def _first_breach(checked: pl.DataFrame, keys: list[str]) -> pl.DataFrame:
    """Rows whose present actual breaks the bound; at most one per key, min first.

    Bounds are inclusive. NaN is excluded explicitly because Polars orders NaN
    above every number, while the reference's IEEE comparisons never fire on it.
    """
    actual = pl.col("actual")
    threshold = pl.col("threshold")
    breaks = ((pl.col("bound") == "min") & (actual < threshold)) | (
        (pl.col("bound") == "max") & (actual > threshold)
    )
    return (
        checked.filter(actual.is_not_null() & actual.is_not_nan() & breaks)
        .sort(pl.col("bound") == "max", maintain_order=True)
        .unique(subset=keys, keep="first", maintain_order=True)
    )


def bound_reason(actual: float, bound: str, threshold: float) -> str:
    """§5.1's reason for a breached bound: ``0.500000 < min 0.900000``."""
    operator = "<" if bound == "min" else ">"
    return f"{actual:.6f} {operator} {bound} {threshold:.6f}"


def _json_float(value: float) -> float | None:
    # serde_json writes a non-finite float as null (GATE_AND_COMPARE.md §1.3).
    return float(value) if math.isfinite(value) else None

"""The gates ``--must-refuse`` and ``--answers`` bring to a gated run, and their rows.

A must-refuse list is an assertion — "assert refused_count == len(MUST_REFUSE)",
as the second seed puts it — and an assertion that could not be evaluated has
not passed. So a gated run (``--thresholds``) given ``--must-refuse`` whose
thresholds file bounds no ``abstention.*`` metric applies it: every must-refuse
case abstained. A case that surfaced fails it, and so does a case the rule could
not judge (undetermined) or whose probes failed: each is the bound it amounts
to — ``abstention.false_answers``, ``abstention.undetermined_rate``,
``abstention.failure_rate`` at ``max 0`` — with the cases behind it and, for the
undetermined ones, how to measure them. ``abstention.*`` bounds in the file
replace the implied check. The same for ``--answers``: a gated run whose file
bounds no ``answers.*`` metric fails when no listed case produced a sample (an
explicit ``answers.*`` bound already fails then; its reason gains the cause).
taguru's own metrics are gated exactly as before, and a run without either flag
gets no byte more.

:func:`flag_gate_rows` reads the same verdicts back from an artifact alone: one
row per flag given — what every CI output (job summary, JUnit, HTML report)
shows, gated or not.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

import polars as pl

from taguru_eval.gate import (
    NO_SAMPLES_REASON,
    FlagGate,
    GateReport,
    Violation,
    bound_reason,
    offenders_suffix,
)
from taguru_eval.inputs.thresholds import ANSWERS_FLAG, MUST_REFUSE_FLAG, Thresholds
from taguru_eval.score.abstention import ABSTAINED, FAILED, SURFACED, UNDETERMINED, VERDICTS

IMPLIED: Final = "implied"
EXPLICIT: Final = "explicit"
ABSTENTION_PREFIX: Final = "abstention."
ANSWERS_PREFIX: Final = "answers."

MEASURE_FIX: Final = (
    "measure them with --refusal-rule any, a server whose vector lane runs, "
    "or explicit abstention.* bounds in the thresholds file"
)
"""How to turn undetermined must-refuse cases into a verdict."""

MUST_REFUSE_CHECK: Final = "every must-refuse case must abstain"
ANSWERS_CHECK: Final = "at least one listed case must be judged"

_NOT_ABSTAINED: Final = (
    ("abstention.false_answers", SURFACED),
    ("abstention.undetermined_rate", UNDETERMINED),
    ("abstention.failure_rate", FAILED),
)
"""The implied check as bounds: each verdict but ``abstained``, the metric that
counts it (at ``max 0``)."""


def apply_flag_gates(
    report: GateReport,
    thresholds: Thresholds,
    metrics: Mapping[str, Mapping[str, Any]],
    *,
    refusals: pl.DataFrame | None = None,
    members: pl.DataFrame | None = None,
    rule: str | None = None,
    answers_listed: int | None = None,
) -> GateReport:
    """``report`` with the gates of the flags given: ``refusals`` (the scorer's
    ``refusal_cases``), ``members`` (its ``membership``) and ``rule`` with
    ``--must-refuse``; ``answers_listed`` (the answers file's case count) with
    ``--answers``. ``metrics`` is the scorer's metrics mapping. The implied
    violations join the aggregate ones in metric-name order."""
    added: list[Violation] = []
    gates: list[FlagGate] = []
    violations = list(report.violations)
    if refusals is not None and members is not None and rule is not None:
        gate, implied = _must_refuse_gate(report, thresholds, refusals, members, metrics, rule)
        gates.append(gate)
        added.extend(implied)
    if answers_listed is not None:
        violations = _with_answers_cause(violations, answers_listed)
        gate, implied = _answers_gate(violations, thresholds, metrics, answers_listed)
        gates.append(gate)
        added.extend(implied)
    if not gates:
        return report
    aggregate = sorted(
        [*(v for v in violations if v.scope == "aggregate"), *added], key=lambda v: v.metric
    )
    rest = [v for v in violations if v.scope != "aggregate"]
    return dataclasses.replace(report, violations=(*aggregate, *rest), flag_gates=tuple(gates))


def _tally(refusals: pl.DataFrame) -> dict[str, int]:
    counts = dict.fromkeys(VERDICTS, 0)
    for verdict, count in refusals.group_by("verdict").len().iter_rows():
        counts[verdict] = count
    return counts


def _counts_text(counts: Mapping[str, int]) -> str:
    return ", ".join(f"{counts.get(verdict, 0)} {verdict}" for verdict in VERDICTS)


def _reasons(refusals: pl.DataFrame, verdict: str) -> str:
    """``5 vector_lane_not_run, 1 no_plan``: why the cases of ``verdict`` got it."""
    reasons = (
        refusals.filter(pl.col("verdict") == verdict)
        .group_by(pl.col("reason").fill_null("unknown"))
        .len()
        .sort("len", "reason", descending=[True, False])
    )
    return ", ".join(f"{count} {reason}" for reason, count in reasons.iter_rows())


def _must_refuse_gate(
    report: GateReport,
    thresholds: Thresholds,
    refusals: pl.DataFrame,
    members: pl.DataFrame,
    metrics: Mapping[str, Mapping[str, Any]],
    rule: str,
) -> tuple[FlagGate, list[Violation]]:
    counts = _tally(refusals)
    tally = _counts_text(counts)
    if any(name.startswith(ABSTENTION_PREFIX) for name in thresholds.aggregate):
        passed = not any(v.metric.startswith(ABSTENTION_PREFIX) for v in report.violations)
        line = (
            f"  must-refuse gate: {_word(passed)} — the thresholds file's abstention.* bounds "
            f"(they replace the implied check: {MUST_REFUSE_CHECK}): {tally}"
        )
        return FlagGate(MUST_REFUSE_FLAG, EXPLICIT, passed, line), []
    why = {
        SURFACED: (
            f"these surfaced evidence, and {MUST_REFUSE_CHECK} (implied by {MUST_REFUSE_FLAG}: "
            "the thresholds file bounds no abstention.* metric)"
        ),
        UNDETERMINED: (
            f"undetermined is not abstained: rule '{rule}' could not judge them "
            f"({_reasons(refusals, UNDETERMINED)}); {MEASURE_FIX}"
        ),
        FAILED: (
            f"a probe call failed ({_reasons(refusals, FAILED)}), so nothing was judged: "
            "the abstention block's cases say which call"
        ),
    }
    violations = [
        Violation(
            scope="aggregate",
            metric=metric,
            bound="max",
            threshold=0.0,
            actual=float(metrics[metric]["value"]),
            reason=(
                bound_reason(float(metrics[metric]["value"]), "max", 0.0)
                + offenders_suffix(members, metric, "max")
                + f" — {why[verdict]}"
            ),
        )
        for metric, verdict in _NOT_ABSTAINED
        if counts[verdict]
    ]
    line = (
        f"  must-refuse gate: {_word(not violations)} — {MUST_REFUSE_CHECK} (implied by "
        f"{MUST_REFUSE_FLAG}; abstention.* bounds in the thresholds file replace this check): "
        f"{tally}"
    )
    return FlagGate(MUST_REFUSE_FLAG, IMPLIED, not violations, line), violations


def _no_sample_cause(listed: int) -> str:
    return (
        f"none of the {listed} listed case(s) was judged: the first lane of every one failed "
        "(its message is in the case block)"
    )


def _with_answers_cause(violations: list[Violation], listed: int) -> list[Violation]:
    """An explicit ``answers.*`` bound with no samples says why there were none."""
    return [
        dataclasses.replace(v, reason=f"{v.reason} — {_no_sample_cause(listed)}")
        if v.metric.startswith(ANSWERS_PREFIX) and v.reason == NO_SAMPLES_REASON
        else v
        for v in violations
    ]


def _answers_gate(
    violations: Sequence[Violation],
    thresholds: Thresholds,
    metrics: Mapping[str, Mapping[str, Any]],
    listed: int,
) -> tuple[FlagGate, list[Violation]]:
    judged = int(metrics["answers.hit_at_k"]["n"])
    tally = f"{judged} of {listed} listed case(s) judged"
    if any(name.startswith(ANSWERS_PREFIX) for name in thresholds.aggregate):
        passed = not any(v.metric.startswith(ANSWERS_PREFIX) for v in violations)
        line = (
            f"  answers gate: {_word(passed)} — the thresholds file's answers.* bounds "
            f"(they replace the implied check: {ANSWERS_CHECK}): {tally}"
        )
        return FlagGate(ANSWERS_FLAG, EXPLICIT, passed, line), []
    implied = (
        []
        if judged
        else [
            Violation(
                scope="aggregate",
                metric="answers.hit_at_k",
                actual=None,
                reason=(
                    f"{NO_SAMPLES_REASON} — {_no_sample_cause(listed)}; {ANSWERS_CHECK} "
                    f"(implied by {ANSWERS_FLAG}: the thresholds file bounds no answers.* metric)"
                ),
            )
        ]
    )
    line = (
        f"  answers gate: {_word(bool(judged))} — {ANSWERS_CHECK} (implied by {ANSWERS_FLAG}; "
        f"answers.* bounds in the thresholds file replace this check): {tally}"
    )
    return FlagGate(ANSWERS_FLAG, IMPLIED, bool(judged), line), implied


def _word(passed: bool) -> str:
    return "PASS" if passed else "FAIL"


# --------------------------------------------------------------------------- rows


PASS, FAIL, NOT_GATED = "PASS", "FAIL", "not gated"


@dataclass(frozen=True)
class FlagGateRow:
    """One flag's row in a CI output, read from the artifact alone.

    ``verdict`` is ``PASS``, ``FAIL`` or ``not gated`` (no ``--thresholds``);
    ``judged_by`` says what judged it; ``counts`` the figures behind it;
    ``undetermined`` the must-refuse cases no probe could judge (``None`` for
    answers); ``reasons`` the failing violations' reasons; ``offenders`` each
    must-refuse case that did not abstain, as ``(case_id, verdict, question)``
    (the user's own question, from the abstention block)."""

    name: str
    flag: str
    verdict: str
    judged_by: str
    counts: str
    undetermined: int | None
    reasons: tuple[str, ...]
    offenders: tuple[tuple[str, str, str], ...] = ()

    @property
    def failed(self) -> bool:
        """Whether this gate failed the run."""
        return self.verdict == FAIL


def flag_gate_rows(doc: Mapping[str, Any]) -> list[FlagGateRow]:
    """The must-refuse row (with ``--must-refuse``) and the answers row (with
    ``--answers``) of a run's evaluation.json head, in that order."""
    thresholds = doc.get("thresholds")
    recorded = {
        entry.get("flag"): entry
        for entry in (thresholds or {}).get("flag_gates") or []
        if isinstance(entry, Mapping)
    }
    violations = [v for v in (thresholds or {}).get("violations") or [] if isinstance(v, Mapping)]
    rows: list[FlagGateRow] = []
    block = doc.get("abstention")
    if isinstance(block, Mapping):
        counts = {verdict: int((block.get("counts") or {}).get(verdict, 0)) for verdict in VERDICTS}
        offenders = tuple(
            (str(case.get("case_id")), str(case.get("verdict")), str(case.get("query") or ""))
            for case in block.get("cases") or []
            if isinstance(case, Mapping) and case.get("verdict") != ABSTAINED
        )
        rows.append(
            _row(
                "must-refuse",
                MUST_REFUSE_FLAG,
                ABSTENTION_PREFIX,
                MUST_REFUSE_CHECK,
                f"{sum(counts.values())} case(s), rule {block.get('rule')}: {_counts_text(counts)}",
                counts[UNDETERMINED],
                thresholds,
                recorded,
                violations,
                offenders,
            )
        )
    listed = (doc.get("inputs") or {}).get("answers")
    if isinstance(listed, Mapping):
        hit = (doc.get("metrics") or {}).get("answers.hit_at_k") or {}
        judged = int(hit.get("n") or 0)
        found = round(float(hit.get("mean") or 0.0) * judged)
        rate = f", hit@k {found}/{judged}" if judged else ""
        rows.append(
            _row(
                "answers",
                ANSWERS_FLAG,
                ANSWERS_PREFIX,
                ANSWERS_CHECK,
                f"{judged} of {listed.get('cases')} listed case(s) judged{rate}",
                None,
                thresholds,
                recorded,
                violations,
            )
        )
    return rows


def _row(
    name: str,
    flag: str,
    prefix: str,
    check: str,
    counts: str,
    undetermined: int | None,
    thresholds: Mapping[str, Any] | None,
    recorded: Mapping[Any, Mapping[str, Any]],
    violations: Sequence[Mapping[str, Any]],
    offenders: tuple[tuple[str, str, str], ...] = (),
) -> FlagGateRow:
    reasons = tuple(
        str(v.get("reason", ""))
        for v in violations
        if str(v.get("metric", "")).startswith(prefix) and v.get("scope") == "aggregate"
    )
    if thresholds is None:
        return FlagGateRow(
            name,
            flag,
            NOT_GATED,
            "no --thresholds: report only",
            counts,
            undetermined,
            (),
            offenders,
        )
    entry = recorded.get(flag)
    if entry is None:  # an artifact written before the implied gates
        judged_by = f"the thresholds file's {prefix}* bounds, if any"
        passed = not reasons
    elif entry.get("bounds") == EXPLICIT:
        judged_by = f"the thresholds file's {prefix}* bounds"
        passed = bool(entry.get("passed"))
    else:
        judged_by = f"{check} (implied by {flag})"
        passed = bool(entry.get("passed"))
    return FlagGateRow(
        name, flag, PASS if passed else FAIL, judged_by, counts, undetermined, reasons, offenders
    )

"""A run as a Markdown job summary: verdict, key metrics, violations, worst cases.

Written for CI pages that render Markdown (GitHub Actions' job summary, a
merge-request note): the gate's verdict, the key metrics (every metric compare
classifies cases by, plus passage latency and failure rate) with their deltas
against a base run when one is given, the gate's violations, and the cases
that scored lowest. It holds metric names, case ids, numbers and the gate's
reasons — never a query, a hit's text, a URL or a token.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any, Final

import polars as pl

from taguru_eval._base.text import CONTROL_CHARACTERS
from taguru_eval.analyst import aggregate
from taguru_eval.catalog import CATALOG, Catalog, scalar_expr
from taguru_eval.compare import Comparison
from taguru_eval.compare.significance import (
    INCONCLUSIVE,
    SIGNIFICANT_REGRESSION,
    Significance,
    mde_text,
    test_label,
    verdict_text,
)
from taguru_eval.flag_gates import FAIL, NOT_GATED, PASS, FlagGateRow, flag_gate_rows
from taguru_eval.gate import MAX_LISTED_OFFENDERS, GateReport

EXTRA_KEY_METRICS: Final = ("latency.passage_ms", "passage.failure_rate")
"""Shown after the compared metrics: how fast and how reliably the passage lane answered."""

MAX_LISTED_VIOLATIONS: Final = 20
DEFAULT_WORST_CASES: Final = 10


def summary_markdown(
    doc: Mapping[str, Any],
    metrics: pl.DataFrame,
    cases: pl.DataFrame,
    report: GateReport | None,
    *,
    run_id: str | None = None,
    comparison: Comparison | None = None,
    worst: int = DEFAULT_WORST_CASES,
    catalog: Catalog = CATALOG,
    questions: Mapping[str, str] | None = None,
) -> str:
    """The Markdown summary of one run (``\\n``-terminated).

    ``doc`` is the run's evaluation.json document (context, time, corpus
    stability), ``metrics``/``cases`` its frames, ``report`` its gate verdict
    (``None``: report-only). With ``comparison`` (BASE = a base run, HEAD =
    this run) the metrics table gains the base value and the delta.
    ``questions`` (:func:`~taguru_eval.analyst.aggregate.golden_questions`)
    shows a golden CSV's case beside its question; the must-refuse cases that did
    not abstain are always shown with theirs.
    """
    inputs = doc.get("inputs") or {}
    corpus = doc.get("corpus") or {}
    context = str(inputs.get("context", ""))
    lines = [
        f"## taguru_eval: context `{code_span(context)}` — {gate_verdict(report)}",
        "",
        facts_line(doc, cases.height, run_id, corpus.get("stable") is not False),
        "",
        *flag_gate_lines(flag_gate_rows(doc)),
        *metrics_table(metrics, comparison, catalog),
        "",
        *violation_lines(report),
        *_worst_cases(cases, worst, catalog, questions or {}),
    ]
    return "\n".join(lines).rstrip("\n") + "\n"


def gate_verdict(report: GateReport | None) -> str:
    if report is None:
        return "report-only (no thresholds)"
    if report.passed:
        return "✅ PASS"
    return f"❌ FAIL ({len(report.violations)} violation(s))"


_VERDICT_MARK: Final = {PASS: "✅ PASS", FAIL: "❌ FAIL", NOT_GATED: "not gated"}


def flag_gate_lines(rows: list[FlagGateRow]) -> list[str]:
    """The must-refuse and answers rows, gated or not (nothing without the flags)."""
    if not rows:
        return []
    lines = ["| gate | verdict | judged by | counts |", "|---|---|---|---|"]
    lines.extend(
        f"| {row.name} (`{row.flag}`) | {_VERDICT_MARK[row.verdict]} | "
        f"{cell(row.judged_by)} | {cell(row.counts)} |"
        for row in rows
    )
    lines.append("")
    for row in rows:
        if not row.offenders:
            continue
        lines.append(f"Must-refuse cases that did not abstain ({len(row.offenders)}):")
        lines.append("")
        lines.extend(
            f"- `{code_span(case_id)}` {verdict}: {cell(aggregate.shorten(question))}"
            for case_id, verdict, question in row.offenders[:MAX_LISTED_OFFENDERS]
        )
        hidden = len(row.offenders) - MAX_LISTED_OFFENDERS
        if hidden > 0:
            lines.append(f"- … and {hidden} more")
        lines.append("")
    return lines


def facts_line(doc: Mapping[str, Any], case_count: int, run_id: str | None, stable: bool) -> str:
    facts = [f"{case_count} case(s)", f"generated {cell(str(doc.get('generated_at', '')))}"]
    if run_id is not None:
        facts.append(f"run `{code_span(run_id)}`")
    facts.append("corpus stable" if stable else "**corpus changed during the run**")
    return " · ".join(facts)


UNIT_DECIMALS: Final = {"ratio": 4, "ms": 1}
"""Decimals a metric's value is shown with, by unit: a ratio's four, a latency's one
(``11.0``, not ``11.0000`` ms); any other unit (a count of sources, items…) two."""


def _valued(value: float | None, unit: str, *, signed: bool = False) -> str:
    """``value`` in its unit's precision (:data:`UNIT_DECIMALS`)."""
    if value is None or not math.isfinite(value):
        return "n/a"
    decimals = UNIT_DECIMALS.get(unit, 2)
    return f"{value:+.{decimals}f}" if signed else f"{value:.{decimals}f}"


def _number(value: float | None, *, signed: bool = False) -> str:
    if value is None or not math.isfinite(value):
        return "n/a"
    return f"{value:+.4f}" if signed else f"{value:.4f}"


def metrics_table(
    metrics: pl.DataFrame, comparison: Comparison | None, catalog: Catalog
) -> list[str]:
    names = [
        *catalog.compared,
        *(name for name in EXTRA_KEY_METRICS if name not in catalog.compared),
    ]
    scalars = {
        name: (value, n)
        for name, value, n in metrics.select(
            "metric", scalar_expr().alias("value"), pl.col("n")
        ).iter_rows()
    }
    shown = [name for name in names if name in scalars and scalars[name][1]]
    based = {}
    if comparison is not None:
        based = {
            name: (base, delta)
            for name, base, delta in comparison.metrics.select(
                "metric", "base", "delta"
            ).iter_rows()
        }
    header = "| metric | unit | value | n |"
    rule = "|---|---|---:|---:|"
    if comparison is not None:
        header += " base | Δ |"
        rule += "---:|---:|"
    rows = [header, rule]
    for name in shown:
        value, n = scalars[name]
        unit = catalog[name].unit
        row = f"| {name} | {unit} | {_valued(value, unit)} | {n} |"
        if comparison is not None:
            base, delta = based.get(name, (None, None))
            row += f" {_valued(base, unit)} | {_valued(delta, unit, signed=True)} |"
        rows.append(row)
    if not shown:
        rows.append(
            "| (no metric has samples) | | | |" + (" | |" if comparison is not None else "")
        )
    return rows


def violation_lines(report: GateReport | None) -> list[str]:
    if report is None or report.passed:
        return []
    lines = [f"### Violations ({len(report.violations)})", ""]
    for violation in report.violations[:MAX_LISTED_VIOLATIONS]:
        scope = (
            f"case `{code_span(violation.case_id)}`"
            if violation.case_id is not None
            else violation.scope
        )
        lines.append(f"- [{scope}] {violation.metric}: {cell(violation.reason)}")
    hidden = len(report.violations) - MAX_LISTED_VIOLATIONS
    if hidden > 0:
        lines.append(f"- … and {hidden} more")
    lines.append("")
    return lines


MAX_SIGNATURES: Final = 10
"""Failure signatures the job summary lists (most cases first)."""


def _worst_cases(
    cases: pl.DataFrame, worst: int, catalog: Catalog, questions: Mapping[str, str]
) -> list[str]:
    """The failing cases grouped by failure signature, as the report groups them
    (:func:`~taguru_eval.analyst.aggregate.failure_signatures`): the checks that
    fail and the lane's outcome, how many cases, and the ``worst`` worst of each
    (lowest mean goodness of the compared ratio metrics). 10,000 cases failing
    alike are one row, not ten copies."""
    columns = {
        name: catalog.per_case[name].column
        for name in catalog.compared
        if catalog[name].unit == "ratio" and catalog.per_case[name].column in cases.columns
    }
    if worst < 1 or cases.height == 0:
        return []
    scores = aggregate.case_scores(cases, columns, catalog) if columns else None
    signatures = aggregate.failure_signatures(cases, scores=scores, examples=min(worst, 3))
    if signatures.height == 0:
        return []
    failing = int(signatures.get_column("cases").sum())
    lines = [
        f"### Worst cases by failure signature ({failing} of {cases.height} case(s) fail a "
        f"check or their lane, {signatures.height} signature(s))",
        "",
        "| fails | lane | cases | share | worst |",
        "|---|---|---:|---:|---|",
    ]
    for row in signatures.head(MAX_SIGNATURES).iter_rows(named=True):
        examples = ", ".join(_case_label(case_id, questions) for case_id in row["examples"])
        lines.append(
            f"| {cell(row['fails'])} | {cell(row['lane'])} | {row['cases']} | "
            f"{row['share']:.1%} | {examples} |"
        )
    hidden = signatures.height - MAX_SIGNATURES
    if hidden > 0:
        lines.append(f"| … and {hidden} more signature(s) | | | | |")
    return lines


def _mde(row: Mapping[str, Any]) -> str:
    """The MDE cell: its value, or why there is none (no variance, one pair)."""
    text = mde_text(row)
    return text.removesuffix(")").replace("n/a (", "") if text.startswith("n/a (") else text


def _case_label(case_id: str, questions: Mapping[str, str]) -> str:
    """`` `case` ``, or `` `golden-007` (the question) `` for a golden CSV's case."""
    question = questions.get(case_id)
    label = f"`{code_span(case_id)}`"
    return f"{label} ({cell(question)})" if question else label


def _one_line(text: str) -> str:
    """Whitespace runs as one space; other control characters (C0, DEL, C1, the
    bidirectional controls: :data:`~taguru_eval._base.text.CONTROL_CHARACTERS`)
    as U+FFFD."""
    return _CONTROL.sub("\ufffd", " ".join(text.split()))


_CONTROL: Final = re.compile(CONTROL_CHARACTERS)


def cell(text: str) -> str:
    """Text safe inside a Markdown table cell or list item: one line, no pipe, no HTML."""
    one_line = _one_line(text)
    return (
        one_line.replace("\\", "\\\\").replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;")
    )


def code_span(text: str) -> str:
    """Text for inside a backtick code span (a backtick becomes ʼ; a pipe is escaped)."""
    return _one_line(text).replace("`", "ʼ").replace("|", "\\|")


def significance_markdown(
    tested: Significance, *, base: str, head: str, heading: str = "##", named: bool = False
) -> str:
    """``compare --summary``: the significance tests as a Markdown job summary — the
    verdict counts, then every test with its interval, adjusted p-value and MDE, the
    ones that need a look first (``\\n``-terminated). ``heading``: its title's level
    (the pull-request comment nests it one level down); ``named``: each inconclusive
    reason starts with its test's name (the comment's list; ``compare --summary``
    keeps its bytes)."""
    frame = tested.frame
    counts = frame.get_column("verdict").value_counts(sort=True)
    tally = ", ".join(f"{count} {verdict}" for verdict, count in counts.iter_rows())
    rank = pl.col("verdict").replace_strict(
        {SIGNIFICANT_REGRESSION: 0, INCONCLUSIVE: 1}, default=2, return_dtype=pl.Int8
    )
    lines = [
        f"{heading} taguru_eval compare: `{code_span(base)}` → `{code_span(head)}` — {cell(tally)}",
        "",
        f"Paired tests, {cell(tested.correction)} over {tested.family_size} test(s) of one "
        f"family ({cell(tested.family)}), "
        f"alpha {tested.alpha:g}; MDE: the smallest shift these cases detect 80% of the time.",
        "",
        "| test | verdict | Δ | CI | adjusted p | MDE | n |",
        "|---|---|---:|---|---:|---:|---:|",
    ]
    for row in frame.sort(rank, maintain_order=True).iter_rows(named=True):
        interval = (
            "n/a"
            if row["ci_low"] is None
            else f"[{_number(row['ci_low'], signed=True)}, {_number(row['ci_high'], signed=True)}]"
        )
        lines.append(
            f"| {cell(test_label(row))} | {cell(row['verdict'])} | "
            f"{_number(row['mean_delta'], signed=True)} | {interval} | "
            f"{_number(row['p_adjusted'])} | {_mde(row)} | {row['n']} |"
        )
    why = [
        f"{test_label(row)} {verdict_text(row)}" if named else verdict_text(row)
        for row in frame.filter(pl.col("verdict") == INCONCLUSIVE).iter_rows(named=True)
    ]
    if why:
        lines += ["", "Inconclusive: add cases rather than loosen a bound.", ""]
        lines += [f"- {cell(text)}" for text in why]
    return "\n".join(lines) + "\n"

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

from taguru_eval.catalog import CATALOG, Catalog, scalar_expr
from taguru_eval.compare import Comparison
from taguru_eval.compare.significance import (
    INCONCLUSIVE,
    SIGNIFICANT_REGRESSION,
    Significance,
    test_label,
    verdict_text,
)
from taguru_eval.flag_gates import FAIL, NOT_GATED, PASS, FlagGateRow, flag_gate_rows
from taguru_eval.gate import GateReport

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
) -> str:
    """The Markdown summary of one run (``\\n``-terminated).

    ``doc`` is the run's evaluation.json document (context, time, corpus
    stability), ``metrics``/``cases`` its frames, ``report`` its gate verdict
    (``None``: report-only). With ``comparison`` (BASE = a base run, HEAD =
    this run) the metrics table gains the base value and the delta.
    """
    inputs = doc.get("inputs") or {}
    corpus = doc.get("corpus") or {}
    context = str(inputs.get("context", ""))
    lines = [
        f"## taguru_eval: context `{_code(context)}` — {_verdict(report)}",
        "",
        _facts(doc, cases.height, run_id, corpus.get("stable") is not False),
        "",
        *_flag_gates(flag_gate_rows(doc)),
        *_metrics_table(metrics, comparison, catalog),
        "",
        *_violations(report),
        *_worst_cases(cases, worst, catalog),
    ]
    return "\n".join(lines).rstrip("\n") + "\n"


def _verdict(report: GateReport | None) -> str:
    if report is None:
        return "report-only (no thresholds)"
    if report.passed:
        return "✅ PASS"
    return f"❌ FAIL ({len(report.violations)} violation(s))"


_VERDICT_MARK: Final = {PASS: "✅ PASS", FAIL: "❌ FAIL", NOT_GATED: "not gated"}


def _flag_gates(rows: list[FlagGateRow]) -> list[str]:
    """The must-refuse and answers rows, gated or not (nothing without the flags)."""
    if not rows:
        return []
    lines = ["| gate | verdict | judged by | counts |", "|---|---|---|---|"]
    lines.extend(
        f"| {row.name} (`{row.flag}`) | {_VERDICT_MARK[row.verdict]} | "
        f"{_cell(row.judged_by)} | {_cell(row.counts)} |"
        for row in rows
    )
    return [*lines, ""]


def _facts(doc: Mapping[str, Any], case_count: int, run_id: str | None, stable: bool) -> str:
    facts = [f"{case_count} case(s)", f"generated {_cell(str(doc.get('generated_at', '')))}"]
    if run_id is not None:
        facts.append(f"run `{_code(run_id)}`")
    facts.append("corpus stable" if stable else "**corpus changed during the run**")
    return " · ".join(facts)


def _number(value: float | None, *, signed: bool = False) -> str:
    if value is None or not math.isfinite(value):
        return "n/a"
    return f"{value:+.4f}" if signed else f"{value:.4f}"


def _metrics_table(
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
        row = f"| {name} | {catalog[name].unit} | {_number(value)} | {n} |"
        if comparison is not None:
            base, delta = based.get(name, (None, None))
            row += f" {_number(base)} | {_number(delta, signed=True)} |"
        rows.append(row)
    if not shown:
        rows.append(
            "| (no metric has samples) | | | |" + (" | |" if comparison is not None else "")
        )
    return rows


def _violations(report: GateReport | None) -> list[str]:
    if report is None or report.passed:
        return []
    lines = [f"### Violations ({len(report.violations)})", ""]
    for violation in report.violations[:MAX_LISTED_VIOLATIONS]:
        scope = (
            f"case `{_code(violation.case_id)}`"
            if violation.case_id is not None
            else violation.scope
        )
        lines.append(f"- [{scope}] {violation.metric}: {_cell(violation.reason)}")
    hidden = len(report.violations) - MAX_LISTED_VIOLATIONS
    if hidden > 0:
        lines.append(f"- … and {hidden} more")
    lines.append("")
    return lines


def _worst_cases(cases: pl.DataFrame, worst: int, catalog: Catalog) -> list[str]:
    """The ``worst`` cases by the mean of their ratio metrics (lowest first)."""
    ratios = [
        name
        for name in catalog.compared
        if catalog[name].unit == "ratio"
        and catalog.per_case[name].column in cases.columns
        and cases.get_column(catalog.per_case[name].column).is_not_null().any()
    ]
    if worst < 1 or not ratios:
        return []
    columns = {name: catalog.per_case[name].column for name in ratios}
    ranked = (
        cases.select(
            "case_index",
            "case_id",
            *(pl.col(column).cast(pl.Float64).alias(name) for name, column in columns.items()),
        )
        .with_columns(pl.mean_horizontal(ratios).alias("score"))
        .filter(pl.col("score").is_not_null() & (pl.col("score") < 1.0))
        .sort("score", "case_index")
        .head(worst)
    )
    if ranked.height == 0:
        return []
    lines = [
        f"### Worst cases ({ranked.height}, lowest mean of {len(ratios)} ratio metric(s))",
        "",
        "| case | " + " | ".join(ratios) + " |",
        "|---|" + "---:|" * len(ratios),
    ]
    for row in ranked.iter_rows(named=True):
        cells = " | ".join(_number(row[name]) for name in ratios)
        lines.append(f"| `{_code(row['case_id'])}` | {cells} |")
    return lines


def _one_line(text: str) -> str:
    """Whitespace runs as one space; other control characters as U+FFFD."""
    return _CONTROL.sub("\ufffd", " ".join(text.split()))


_CONTROL: Final = re.compile(r"[\x00-\x1f\x7f]")


def _cell(text: str) -> str:
    """Text safe inside a Markdown table cell or list item: one line, no pipe, no HTML."""
    one_line = _one_line(text)
    return (
        one_line.replace("\\", "\\\\").replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;")
    )


def _code(text: str) -> str:
    """Text for inside a backtick code span (a backtick becomes ʼ; a pipe is escaped)."""
    return _one_line(text).replace("`", "ʼ").replace("|", "\\|")


def significance_markdown(tested: Significance, *, base: str, head: str) -> str:
    """``compare --summary``: the significance tests as a Markdown job summary — the
    verdict counts, then every test with its interval, adjusted p-value and MDE, the
    ones that need a look first (``\\n``-terminated)."""
    frame = tested.frame
    counts = frame.get_column("verdict").value_counts(sort=True)
    tally = ", ".join(f"{count} {verdict}" for verdict, count in counts.iter_rows())
    rank = pl.col("verdict").replace_strict(
        {SIGNIFICANT_REGRESSION: 0, INCONCLUSIVE: 1}, default=2, return_dtype=pl.Int8
    )
    lines = [
        f"## taguru_eval compare: `{_code(base)}` → `{_code(head)}` — {_cell(tally)}",
        "",
        f"Paired tests, {_cell(tested.correction)} over {tested.family_size} test(s), "
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
            f"| {_cell(test_label(row))} | {_cell(row['verdict'])} | "
            f"{_number(row['mean_delta'], signed=True)} | {interval} | "
            f"{_number(row['p_adjusted'])} | {_number(row['mde'])} | {row['n']} |"
        )
    why = [
        verdict_text(row)
        for row in frame.filter(pl.col("verdict") == INCONCLUSIVE).iter_rows(named=True)
    ]
    if why:
        lines += ["", "Inconclusive: add cases rather than loosen a bound.", ""]
        lines += [f"- {_cell(text)}" for text in why]
    return "\n".join(lines) + "\n"

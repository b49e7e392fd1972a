"""A run's threshold gate as a JUnit XML test report, for CI systems to display.

Every ``min``/``max`` side of an aggregate bound is a test case (suite
``aggregate``), and so is the corpus-stability check (suite ``corpus``). The
per-case bounds (after the default + override merge, one check per case ×
metric × side, suite ``cases``) are listed as ``junit_cases`` says: with
``failing`` (the default, ``--junit-cases failing``) only the violated ones
are test cases, with ``all`` every one is. A 20,000-case run with four
per-case sides is 80,000 checks, and a report of all 80,010 test cases
(8.7 MB, ``benchmarks/junit_scale.py``) is one no CI page shows usefully. A
bound the gate reported as violated is a ``<failure>`` whose message is the
violation's reason (the same text as the stdout line); a per-case bound whose
metric the case did not compute is ``<skipped>`` with the gate's skip text
(listed with ``all`` only); every other bound passed. A report-only run (no
thresholds) is one empty suite saying so.

The counts stay honest: every ``tests``/``failures``/``skipped`` attribute
counts the test cases written, and the run's properties (on the first suite)
say what was not written: ``taguru_eval.checks`` (every check of the gate),
``taguru_eval.elided_passing_case_checks`` and
``taguru_eval.elided_skipped_case_checks``, so that ``tests`` plus the two
elided counts is ``checks``; the ``cases`` suite also says so in a
``<system-out>`` line when it leaves checks out.

The outcome of each bound is read from the :class:`~taguru_eval.gate.GateReport`
(never re-judged here); the bounds come from the
:class:`~taguru_eval.inputs.thresholds.Thresholds`, the actual values from the
run's ``metrics`` and ``cases`` frames. The document is built column-wise
(Polars string expressions), so its time follows the frames' size, not a
Python loop per test case. It holds metric names, case ids, numbers and the
gate's reasons — no corpus text, no URL, no token. It follows the JUnit
format CI tools read (the Jenkins xUnit plugin's ``junit-10`` schema:
``testsuites > testsuite > testcase > failure | skipped``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Final

import polars as pl

from taguru_eval._base.text import CONTROL_CHARACTERS
from taguru_eval.analyst.aggregate import shorten
from taguru_eval.catalog import CATALOG, Catalog, scalar_expr
from taguru_eval.compare.significance import (
    INCONCLUSIVE,
    NOT_TESTED,
    SIGNIFICANT_REGRESSION,
    Significance,
    test_label,
    verdict_text,
)
from taguru_eval.flag_gates import NOT_GATED, FlagGateRow
from taguru_eval.gate import GateReport, case_values_from_cases_frame, skip_reason
from taguru_eval.inputs.thresholds import Thresholds
from taguru_eval.options import DEFAULT_JUNIT_CASES, JunitCases, junit_cases_of

REPORT_NAME: Final = "taguru_eval"
FAILURE_TYPE: Final = "threshold"
PASSED, FAILED, SKIPPED = "passed", "failed", "skipped"

_ROWS: Final = {
    "suite": pl.String,
    "classname": pl.String,
    "name": pl.String,
    "status": pl.String,
    "message": pl.String,
    "detail": pl.String,
}
"""One row per test case: where it goes, its outcome and its texts."""

_OPERATOR: Final = {"min": ">=", "max": "<="}

# XML 1.0 cannot carry these characters at all, escaped or not.
_NOT_XML: Final = r"[\x00-\x08\x0b\x0c\x0e-\x1f\x{fffe}\x{ffff}]"


def junit_xml(
    thresholds: Thresholds | None,
    report: GateReport | None,
    metrics: pl.DataFrame,
    cases: pl.DataFrame,
    *,
    run_id: str,
    context: str,
    generated_at: str,
    catalog: Catalog = CATALOG,
    junit_cases: JunitCases = DEFAULT_JUNIT_CASES,
    flag_gates: Sequence[FlagGateRow] = (),
    questions: Mapping[str, str] | None = None,
) -> str:
    """The JUnit XML document of one run's gate (UTF-8 text, ``\\n``-terminated).

    ``thresholds`` and ``report`` are both ``None`` for a report-only run.
    ``metrics``/``cases`` are the run's frames (:attr:`taguru_eval.api.Run.metrics`
    and ``.cases``); ``generated_at`` is the artifact's UTC timestamp.
    ``junit_cases`` is ``--junit-cases``: ``"failing"`` lists a per-case bound
    only when it is violated, ``"all"`` lists every one (module docstring).
    ``flag_gates`` (:func:`taguru_eval.flag_gates.flag_gate_rows`) are the
    must-refuse and answers rows: suite ``flag_gates``, one test case per flag
    given, failed when its gate failed, skipped in a report-only run; its detail
    lists the must-refuse cases that did not abstain, with their questions.
    ``questions`` (:func:`~taguru_eval.analyst.aggregate.golden_questions`) names a
    golden CSV's case by its question too: ``golden-003 (How many …?): …``.
    """
    listed = junit_cases_of(junit_cases)
    properties = {"context": context, "run_id": run_id}
    flags = _flag_rows(flag_gates)
    if thresholds is None or report is None:
        suites = [_suite("report-only", _empty_rows(), generated_at, properties)]
        if flags.height:
            suites.append(_suite("flag_gates", flags, generated_at, {}))
        return _document(suites, flags.height, 0, flags.height)
    properties["thresholds_sha256"] = report.sha256
    violations = _violations(report)
    aggregate = _aggregate_rows(thresholds, metrics, violations)
    case_ids = cases.sort("case_index").get_column("case_id").to_list()
    every_case = _case_rows(
        thresholds, cases, case_ids, violations, catalog, listed, questions or {}
    )
    corpus = _corpus_rows(report)
    status = every_case.get_column("status")
    passing, skipped_checks = int((status == PASSED).sum()), int((status == SKIPPED).sum())
    per_case = every_case if listed == "all" else every_case.filter(pl.col("status") == FAILED)
    elided_passing = passing if listed == "failing" else 0
    elided_skipped = skipped_checks if listed == "failing" else 0
    properties |= {
        "taguru_eval.junit_cases": listed,
        "taguru_eval.checks": str(
            aggregate.height + every_case.height + corpus.height + flags.height
        ),
        "taguru_eval.elided_passing_case_checks": str(elided_passing),
        "taguru_eval.elided_skipped_case_checks": str(elided_skipped),
    }
    note = None
    if elided_passing or elided_skipped:
        note = (
            f"{elided_passing} passing and {elided_skipped} skipped per-case checks are not "
            "listed (--junit-cases failing lists the violated ones; --junit-cases all lists "
            "every one)"
        )
    suites = [
        _suite("aggregate", aggregate, generated_at, properties),
        _suite("cases", per_case, generated_at, {}, note),
        _suite("corpus", corpus, generated_at, {}),
    ]
    if flags.height:
        suites.append(_suite("flag_gates", flags, generated_at, {}))
    rows = pl.concat([aggregate, per_case, corpus, flags])
    failures = rows.filter(pl.col("status") == FAILED).height
    skipped = rows.filter(pl.col("status") == SKIPPED).height
    return _document(suites, rows.height, failures, skipped)


# ------------------------------------------------------------------ outcomes


def _violations(report: GateReport) -> pl.DataFrame:
    return pl.DataFrame(
        [
            (
                violation.scope,
                violation.case_id,
                violation.metric,
                violation.bound,
                violation.reason,
            )
            for violation in report.violations
        ],
        schema={
            "scope": pl.String,
            "case_id": pl.String,
            "metric": pl.String,
            "violated": pl.String,
            "reason": pl.String,
        },
        orient="row",
    )


def bound_name(prefix: pl.Expr | None = None) -> pl.Expr:
    """``recall.mrr >= 0.5`` (or ``<case_id>: recall.mrr >= 0.5``), from a frame's
    ``metric``, ``bound`` (``min``/``max``) and ``threshold`` columns; the OTLP
    export's explanations say a bound the same way."""
    operator = pl.col("bound").replace_strict(_OPERATOR, return_dtype=pl.String)
    parts = [pl.col("metric"), pl.lit(" "), operator, pl.lit(" "), pl.col("threshold").cast(str)]
    return pl.concat_str([prefix, pl.lit(": "), *parts] if prefix is not None else parts)


def _outcome(violated: pl.Expr, skipped: pl.Expr) -> list[pl.Expr]:
    status = (pl.when(violated).then(pl.lit(FAILED)).when(skipped).then(pl.lit(SKIPPED))).otherwise(
        pl.lit(PASSED)
    )
    message = pl.when(violated).then(pl.col("reason")).otherwise(pl.lit(None, pl.String))
    return [status.alias("status"), message.alias("message")]


def _aggregate_rows(
    thresholds: Thresholds, metrics: pl.DataFrame, violations: pl.DataFrame
) -> pl.DataFrame:
    actual = metrics.select(
        "metric", scalar_expr().alias("actual"), pl.col("n").cast(pl.Int64)
    ).unique("metric", keep="last")
    reasons = violations.filter(pl.col("scope") == "aggregate").select(
        "metric", "violated", "reason"
    )
    checked = (
        thresholds.aggregate_bounds.join(actual, on="metric", how="left")
        .join(reasons, on="metric", how="left")
        .with_row_index("order")
    )
    # A metric with no samples fails every side of its bound (violated is null then).
    violated = pl.col("reason").is_not_null() & (
        pl.col("violated").is_null() | (pl.col("violated") == pl.col("bound"))
    )
    detail = pl.concat_str(
        pl.lit("[aggregate] "),
        pl.col("metric"),
        pl.lit(": actual "),
        pl.col("actual").cast(str).fill_null("n/a"),
        pl.lit(" (n="),
        pl.col("n").cast(str).fill_null("0"),
        pl.lit(")"),
    )
    return checked.sort("order").select(
        pl.lit("aggregate").alias("suite"),
        pl.lit(f"{REPORT_NAME}.aggregate").alias("classname"),
        bound_name().alias("name"),
        *_outcome(violated, pl.lit(False)),
        detail.alias("detail"),
    )


def _case_rows(
    thresholds: Thresholds,
    cases: pl.DataFrame,
    case_ids: list[str],
    violations: pl.DataFrame,
    catalog: Catalog,
    listed: JunitCases,
    questions: Mapping[str, str],
) -> pl.DataFrame:
    values = case_values_from_cases_frame(cases, catalog).unique(["case_id", "metric"], keep="last")
    reasons = violations.filter(pl.col("scope") == "case").select(
        "case_id", "metric", pl.col("violated").alias("bound"), "reason"
    )
    checked = (
        thresholds.case_bounds(case_ids)
        .with_row_index("order")
        .join(values, on=["case_id", "metric"], how="left")
        .join(reasons, on=["case_id", "metric", "bound"], how="left")
        .sort("order")
    )
    detail = pl.concat_str(
        pl.lit("[case "),
        pl.col("case_id"),
        pl.lit("] "),
        pl.col("metric"),
        pl.lit(": actual "),
        pl.col("value").cast(str),
    )
    rows = checked.select(
        pl.lit("cases").alias("suite"),
        pl.lit(f"{REPORT_NAME}.cases").alias("classname"),
        bound_name(_case_label(questions)).alias("name"),
        *_outcome(pl.col("reason").is_not_null(), pl.col("value").is_null()),
        detail.alias("detail"),
        "case_id",
        "metric",
    )
    # The gate's own skip text, for the (usually few) skipped bounds — only
    # when they are written: a Python call per skipped bound.
    skipped = rows.get_column("status").eq(SKIPPED).arg_true()
    if skipped.len() and listed == "all":
        keys = rows.select("case_id", "metric")[skipped].iter_rows()
        texts = [skip_reason(case_id, metric) for case_id, metric in keys]
        rows = rows.with_columns(rows.get_column("message").scatter(skipped, texts))
    return rows.select(list(_ROWS))


def _corpus_rows(report: GateReport) -> pl.DataFrame:
    unstable = [v for v in report.violations if v.scope == "corpus"]
    return pl.DataFrame(
        [
            (
                "corpus",
                f"{REPORT_NAME}.corpus",
                "corpus.stable",
                FAILED if unstable else PASSED,
                unstable[0].reason if unstable else None,
                "allow_unstable_corpus: " + str(report.allow_unstable_corpus).lower(),
            )
        ],
        schema=_ROWS,
        orient="row",
    )


def _empty_rows() -> pl.DataFrame:
    return pl.DataFrame(schema=_ROWS)


def _case_label(questions: Mapping[str, str]) -> pl.Expr:
    """``case_id``, or ``case_id (question)`` for a case ``questions`` names."""
    if not questions:
        return pl.col("case_id")
    question = pl.col("case_id").replace_strict(
        dict(questions), default=None, return_dtype=pl.String
    )
    return (
        pl.when(question.is_null())
        .then(pl.col("case_id"))
        .otherwise(pl.format("{} ({})", pl.col("case_id"), question))
    )


def _flag_detail(row: FlagGateRow) -> str:
    """The row's counts, then each must-refuse case that did not abstain."""
    listed = [
        f"{case_id} {verdict}: {shorten(question)}" for case_id, verdict, question in row.offenders
    ]
    return "\n".join([row.counts, *listed])


def _flag_rows(rows: Sequence[FlagGateRow]) -> pl.DataFrame:
    """One test case per flag given (``must-refuse: every must-refuse case must
    abstain (implied by --must-refuse)``): failed with its violations' reasons,
    skipped when the run was not gated, else passed; the counts are its detail.
    With explicit bounds the row repeats their verdict (their own test cases in
    ``aggregate`` fail too)."""

    def message(row: FlagGateRow) -> str | None:
        if row.failed:
            return "; ".join(row.reasons) or row.judged_by
        return row.judged_by if row.verdict == NOT_GATED else None

    def status(row: FlagGateRow) -> str:
        if row.failed:
            return FAILED
        return SKIPPED if row.verdict == NOT_GATED else PASSED

    return pl.DataFrame(
        [
            (
                "flag_gates",
                f"{REPORT_NAME}.flag_gates",
                f"{row.name}: {row.judged_by}",
                status(row),
                message(row),
                _flag_detail(row),
            )
            for row in rows
        ],
        schema=_ROWS,
        orient="row",
    )


# ------------------------------------------------------------------ rendering


def _escape(text: pl.Expr, *, attribute: bool) -> pl.Expr:
    escaped = (
        text.str.replace_all(_NOT_XML, "\ufffd")
        # C1, DEL and the bidirectional controls are XML, but no CI page gets them raw.
        .str.replace_all(CONTROL_CHARACTERS, "\ufffd")
        .str.replace_all("&", "&amp;", literal=True)
        .str.replace_all("<", "&lt;", literal=True)
        .str.replace_all(">", "&gt;", literal=True)
    )
    if attribute:
        for raw, reference in (('"', "&quot;"), ("\n", "&#10;"), ("\r", "&#13;"), ("\t", "&#9;")):
            escaped = escaped.str.replace_all(raw, reference, literal=True)
    return escaped


def _escape_text(text: str, *, attribute: bool = True) -> str:
    frame = pl.DataFrame({"text": [text]}, schema={"text": pl.String})
    escaped = frame.select(_escape(pl.col("text"), attribute=attribute)).item()
    assert isinstance(escaped, str)
    return escaped


def _testcases(rows: pl.DataFrame) -> str:
    if rows.height == 0:
        return ""
    opening = pl.concat_str(
        pl.lit('    <testcase classname="'),
        _escape(pl.col("classname"), attribute=True),
        pl.lit('" name="'),
        _escape(pl.col("name"), attribute=True),
        pl.lit('" time="0"'),
    )
    message = _escape(pl.col("message"), attribute=True)
    detail = _escape(pl.col("detail").fill_null(""), attribute=False)
    body = (
        pl.when(pl.col("status") == FAILED)
        .then(
            pl.concat_str(
                pl.lit('>\n      <failure type="'),
                pl.lit(FAILURE_TYPE),
                pl.lit('" message="'),
                message,
                pl.lit('">'),
                detail,
                pl.lit("</failure>\n    </testcase>"),
            )
        )
        .when(pl.col("status") == SKIPPED)
        .then(
            pl.concat_str(
                pl.lit('>\n      <skipped message="'), message, pl.lit('"/>\n    </testcase>')
            )
        )
        .otherwise(pl.lit("/>"))
    )
    text = rows.select(pl.concat_str(opening, body).str.join("\n")).item()
    assert isinstance(text, str)
    return text + "\n"


def _suite(
    name: str,
    rows: pl.DataFrame,
    generated_at: str,
    properties: dict[str, str],
    note: str | None = None,
) -> tuple[str, int, int, int]:
    failures = rows.filter(pl.col("status") == FAILED).height
    skipped = rows.filter(pl.col("status") == SKIPPED).height
    head = (
        f'  <testsuite name="{_escape_text(f"{REPORT_NAME}.{name}")}" tests="{rows.height}" '
        f'failures="{failures}" errors="0" skipped="{skipped}" time="0" '
        f'timestamp="{_escape_text(generated_at.removesuffix("Z"))}">\n'
    )
    listed = "".join(
        f'      <property name="{_escape_text(key)}" value="{_escape_text(value)}"/>\n'
        for key, value in properties.items()
    )
    props = f"    <properties>\n{listed}    </properties>\n" if properties else ""
    if name == "report-only":
        note = "no --thresholds given: this run is report-only"
    out = f"    <system-out>{_escape_text(note, attribute=False)}</system-out>\n" if note else ""
    return (
        f"{head}{props}{_testcases(rows)}{out}  </testsuite>\n",
        rows.height,
        failures,
        skipped,
    )


def _document(
    suites: list[tuple[str, int, int, int]], tests: int, failures: int, skipped: int
) -> str:
    body = "".join(text for text, *_counts in suites)
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        f'<testsuites name="{REPORT_NAME}" tests="{tests}" failures="{failures}" errors="0" '
        f'skipped="{skipped}" time="0">\n{body}</testsuites>\n'
    )


# ------------------------------------------------------------------ compare's tests


def significance_junit(tested: Significance, *, base: str, head: str, generated_at: str) -> str:
    """``compare --junit``: one test case per significance test. ``regressed`` fails,
    ``inconclusive`` is skipped with its reason (not a pass, not a failure: too few
    cases to tell), ``not tested`` is skipped, the others pass."""
    frame = tested.frame
    reasons = [verdict_text(row) for row in frame.iter_rows(named=True)]
    names = [test_label(row) for row in frame.iter_rows(named=True)]
    rows = frame.select(
        pl.lit("compare").alias("suite"),
        pl.lit(f"{REPORT_NAME}.compare").alias("classname"),
        pl.Series("name", names, dtype=pl.String),
        pl.when(pl.col("verdict") == SIGNIFICANT_REGRESSION)
        .then(pl.lit(FAILED))
        .when(pl.col("verdict").is_in([INCONCLUSIVE, NOT_TESTED]))
        .then(pl.lit(SKIPPED))
        .otherwise(pl.lit(PASSED))
        .alias("status"),
        pl.Series("message", reasons, dtype=pl.String),
        pl.format(
            "Δ {} over {} pair(s), CI [{}, {}], p {}, adjusted p {}, MDE {}",
            pl.col("mean_delta").round(4),
            pl.col("n"),
            pl.col("ci_low").round(4),
            pl.col("ci_high").round(4),
            pl.col("p_value").round(4),
            pl.col("p_adjusted").round(4),
            pl.col("mde").round(4),
        ).alias("detail"),
    )
    properties = {
        "base": base,
        "head": head,
        "correction": tested.correction,
        "alpha": f"{tested.alpha:g}",
        "tests": str(tested.family_size),
        "family": tested.family,
    }
    suite = _suite("compare", rows, generated_at, properties)
    _text, tests, failures, skipped = suite
    return _document([suite], tests, failures, skipped)

"""A run (and its comparison with the base branch's) as one sticky pull-request comment.

The comment is the job summary's tables (:mod:`.step_summary`: the gate's verdict,
the must-refuse and answers gates, the aggregate table with the base value and Δ,
the significance tests with their intervals, adjusted p-values, MDEs and the pairs
an inconclusive test needs, the gate's violations) plus what a reviewer of a
change needs and a single run does not have: the regressed cases grouped by
signature, the must-refuse verdicts that flipped, whether cases were classified
on the answers, and links to the job summary and the uploaded report.

It starts with a hidden marker (:func:`marker`) that finds it again on the next
push, keyed so two jobs of one pull request keep two comments. It always fits
under GitHub's limit (:data:`COMMENT_LIMIT`, counted in UTF-8 bytes, which is
never less than the characters GitHub counts): sections are added in order of
importance, and what did not fit is named at the end. Like the job summary it
holds metric names, case ids, numbers and reasons, and the question of a
must-refuse case that did not abstain — never a hit's text, a URL of the server
or a token.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

import polars as pl

from taguru_eval.analyst.aggregate import failing_checks, lane_outcome
from taguru_eval.analyst.step_summary import (
    cell,
    code_span,
    facts_line,
    flag_gate_lines,
    gate_verdict,
    metrics_table,
    significance_markdown,
    violation_lines,
)
from taguru_eval.catalog import CATALOG, Catalog
from taguru_eval.compare import Comparison
from taguru_eval.compare.display import outcome_text, tests_text
from taguru_eval.compare.model import REGRESSED
from taguru_eval.compare.report import abstention_summary, answers_summary
from taguru_eval.compare.significance import Significance
from taguru_eval.flag_gates import flag_gate_rows
from taguru_eval.gate import GateReport

COMMENT_LIMIT: Final = 65_536
"""GitHub's cap on an issue comment's body; a comment stays strictly under it."""

FOOTER_RESERVE: Final = 2_048
"""Bytes kept free for the truncation note."""

MAX_GROUPS: Final = 15
"""Regressed-case signatures listed (most cases first)."""

GROUP_EXAMPLES: Final = 3
"""Case ids named per signature."""

MAX_FLIPS: Final = 20
"""Must-refuse flips listed by name."""

MAX_ID_CHARS: Final = 80
"""A case id longer than this is shown cut, with an ellipsis."""

MARKER_PREFIX: Final = "<!-- taguru_eval:comment key="
_KEY_UNSAFE: Final = re.compile(r"[^A-Za-z0-9._:/@+=-]")


def marker(key: str) -> str:
    """The hidden first line that finds this comment again: ``key`` kept to a safe
    alphabet (nothing that could end an HTML comment or differ once GitHub stores it)."""
    safe = _KEY_UNSAFE.sub("_", key.strip()).replace("--", "-_") or "default"
    return f"{MARKER_PREFIX}{safe} -->"


@dataclass(frozen=True)
class Links:
    """Where the reader goes for the rest: the job summary, the uploaded HTML report."""

    summary: str | None = None
    report: str | None = None

    def line(self) -> str | None:
        parts = [
            f"[{label}]({_url(url)})"
            for label, url in (("job summary", self.summary), ("HTML report", self.report))
            if url
        ]
        return " · ".join(parts) if parts else None


@dataclass(frozen=True)
class Section:
    """A titled block of lines, added whole when it fits, cut at a line when not."""

    name: str
    lines: list[str]


def comment_markdown(
    doc: Mapping[str, Any],
    metrics: pl.DataFrame,
    cases: pl.DataFrame,
    *,
    key: str,
    run_id: str | None = None,
    comparison: Comparison | None = None,
    tested: Significance | None = None,
    links: Links = Links(),
    lanes: pl.DataFrame | None = None,
    catalog: Catalog = CATALOG,
    limit: int = COMMENT_LIMIT,
) -> str:
    """The comment's Markdown (``\\n``-terminated, under ``limit`` UTF-8 bytes).

    ``doc``/``metrics``/``cases`` are the head run's (its evaluation.json document
    and frames; ``lanes`` its ``case_lanes`` table, for the evidence lane's
    outcome); ``comparison`` the base run against it, ``tested`` its significance
    tests (``compare --significance``)."""
    gate = doc.get("thresholds")
    report = GateReport.from_block(gate) if isinstance(gate, Mapping) else None
    context = str((doc.get("inputs") or {}).get("context", ""))
    corpus = doc.get("corpus") or {}
    title = f"## taguru_eval: context `{code_span(context)}` — {gate_verdict(report)}"
    head = [marker(key), title, ""]
    if comparison is not None:
        verdict = f"Against the base run: {cell(outcome_text(comparison.counts))}"
        if tested is not None:
            verdict += f"; significance: {cell(tests_text(tested))}"
        head += [verdict + ".", ""]
    else:
        head += ["No base run to compare with: the table shows this run alone.", ""]
    head += [facts_line(doc, cases.height, run_id, corpus.get("stable") is not False), ""]
    link_line = links.line()
    if link_line:
        head += [f"Details: {link_line}", ""]
    sections = [
        Section("compare warnings", _warnings(comparison)),
        Section("must-refuse and answers gates", flag_gate_lines(flag_gate_rows(doc))),
        Section(
            "aggregate table",
            [
                "### Aggregate metrics" + (" (base → head)" if comparison else ""),
                "",
                *metrics_table(metrics, comparison, catalog),
                "",
            ],
        ),
        Section("significance tests", _significance(comparison, tested)),
        Section("gate violations", violation_lines(report)),
        Section("regressed cases", _regressed(comparison, cases, lanes)),
        Section("must-refuse changes", _must_refuse(comparison)),
        Section("answers", _answers(comparison)),
    ]
    return fit(head, sections, limit, has_links=link_line is not None)


def unfinished_markdown(key: str, context: str, exit_code: str, links: Links = Links()) -> str:
    """The comment of a run that did not finish (the server down, a bad input): it
    replaces the last push's, whose results no longer stand."""
    lines = [
        marker(key),
        f"## taguru_eval: context `{code_span(context)}` — the run did not finish"
        + (f" (exit {cell(exit_code)})" if exit_code else ""),
        "",
        "No results for this push: the job log says why. The comment of an earlier push "
        "was replaced so its results are not read as this one's.",
    ]
    link_line = links.line()
    if link_line:
        lines += ["", f"Details: {link_line}"]
    return "\n".join(lines) + "\n"


def fit(head: Sequence[str], sections: Sequence[Section], limit: int, *, has_links: bool) -> str:
    """``head`` and then each section while it fits under ``limit`` bytes; a section
    that does not fit keeps the lines that do, and the note at the end names what
    was left out of each."""
    budget = limit - 1 - FOOTER_RESERVE
    out = list(head)
    used = sum(_size(line) for line in out)
    left_out: list[str] = []
    for section in sections:
        if not section.lines:
            continue
        kept = 0
        for line in section.lines:
            if used + _size(line) > budget:
                break
            out.append(line)
            used += _size(line)
            kept += 1
        if kept < len(section.lines):
            dropped = len(section.lines) - kept
            left_out.append(
                f"{section.name} ({'all' if kept == 0 else f'the last {dropped} of'} "
                f"{len(section.lines)} line(s))"
            )
    if left_out:
        where = "The job summary and the HTML report hold" if has_links else "The job summary holds"
        note = (
            f"_Cut to stay under GitHub's {limit:,}-character limit. Left out: "
            f"{'; '.join(left_out)}. {where} the whole run._"
        )
        out += ["", note]
    text = "\n".join(out).rstrip("\n") + "\n"
    if len(text.encode("utf-8")) >= limit:  # a head longer than the budget: cut it too
        text = text.encode("utf-8")[: limit - 2].decode("utf-8", "ignore") + "\n"
    return text


def _size(line: str) -> int:
    return len(line.encode("utf-8")) + 1


def _significance(comparison: Comparison | None, tested: Significance | None) -> list[str]:
    if comparison is None or tested is None:
        return []
    base = comparison.base.path or "base"
    head = comparison.head.path or "head"
    text = significance_markdown(tested, base=base, head=head, heading="###", named=True)
    return [*text.splitlines(), ""]


def regressed_groups(
    comparison: Comparison,
    cases: pl.DataFrame,
    lanes: pl.DataFrame | None = None,
    *,
    examples: int = GROUP_EXAMPLES,
) -> pl.DataFrame:
    """The regressed cases grouped by signature: ``fell`` (the metrics the case
    regressed on, ``+``-joined), ``fails`` (the checks the head case fails, as the
    job summary's failure signatures name them, ``—`` for none), ``lane`` (its
    lane's outcome in the head run), ``cases``, ``examples`` (the first case ids),
    most cases first."""
    regressed = comparison.case_drivers().filter(pl.col("kind") == REGRESSED)
    head = (
        cases.select("case_index", "case_id", failing_checks(cases.columns))
        .join(lane_outcome(cases, lanes), on="case_index", how="left")
        .unique("case_id", keep="last", maintain_order=True)
    )
    return (
        regressed.select("case_id", pl.col("drivers").list.join(" + ").alias("fell"))
        .join(head, on="case_id", how="left", maintain_order="left")
        .with_columns(
            pl.col("fails").list.join(", ").fill_null("").replace("", "—"),
            pl.col("lane").fill_null("—"),
        )
        .group_by("fell", "fails", "lane", maintain_order=True)
        .agg(pl.len().cast(pl.Int64).alias("cases"), pl.col("case_id").head(examples))
        .sort(["cases", "fell", "fails", "lane"], descending=[True, False, False, False])
        .select("fell", "fails", "lane", "cases", pl.col("case_id").alias("examples"))
    )


def _regressed(
    comparison: Comparison | None, cases: pl.DataFrame, lanes: pl.DataFrame | None
) -> list[str]:
    if comparison is None:
        return []
    groups = regressed_groups(comparison, cases, lanes)
    if groups.height == 0:
        return []
    total = int(groups.get_column("cases").sum())
    lines = [
        f"### Regressed cases by signature ({total} case(s), {groups.height} signature(s))",
        "",
        "| fell on | fails now | lane | cases | first cases |",
        "|---|---|---|---:|---|",
    ]
    for row in groups.head(MAX_GROUPS).iter_rows(named=True):
        named = ", ".join(f"`{code_span(_clip(case_id))}`" for case_id in row["examples"])
        lines.append(
            f"| {cell(row['fell'])} | {cell(row['fails'])} | {cell(row['lane'])} | "
            f"{row['cases']} | {named} |"
        )
    hidden = groups.slice(MAX_GROUPS)
    if hidden.height:
        lines.append(
            f"| … and {hidden.height} more signature(s), "
            f"{int(hidden.get_column('cases').sum())} case(s) | | | | |"
        )
    return [*lines, ""]


MAX_WARNINGS: Final = 10
"""Compare warnings shown (a differing corpus revision, thresholds, budget…)."""


def _warnings(comparison: Comparison | None) -> list[str]:
    """What compare warned about: the two runs may not measure the same thing."""
    if comparison is None:
        return []
    warnings = list(comparison.warnings)
    if comparison.abstention is not None:
        warnings += [f"abstention: {warning}" for warning in comparison.abstention.warnings]
    if not warnings:
        return []
    lines = [f"> ⚠️ {cell(warning)}" for warning in warnings[:MAX_WARNINGS]]
    if len(warnings) > MAX_WARNINGS:
        lines.append(f"> … and {len(warnings) - MAX_WARNINGS} more warning(s)")
    return [*"\n>\n".join(lines).split("\n"), ""]


def _must_refuse(comparison: Comparison | None) -> list[str]:
    if comparison is None or comparison.abstention is None:
        return []
    block = comparison.abstention
    tally, *_flips = abstention_summary(block)
    lines = ["### Must-refuse changes", "", cell(tally.strip().removeprefix("must-refuse: ")), ""]
    flips = block.changes.filter(pl.col("direction").is_in(["improved", "regressed"]))
    for case_id, kind, base, head, direction in flips.head(MAX_FLIPS).iter_rows():
        lines.append(
            f"- {cell(direction)}: `{code_span(_clip(case_id))}` ({cell(str(kind))}) "
            f"{cell(str(base))} → {cell(str(head))}"
        )
    if flips.height > MAX_FLIPS:
        lines.append(f"- … and {flips.height - MAX_FLIPS} more flip(s)")
    return [*lines, ""]


def _answers(comparison: Comparison | None) -> list[str]:
    if comparison is None or comparison.answers is None:
        return []
    line = answers_summary(comparison.answers).strip().removeprefix("answers: ")
    return ["### Answers", "", cell(line), ""]


def _clip(case_id: str) -> str:
    return case_id if len(case_id) <= MAX_ID_CHARS else case_id[: MAX_ID_CHARS - 1] + "…"


def _url(url: str) -> str:
    """A link target kept inside its parentheses (no space, no parenthesis)."""
    return re.sub(r"[\s()<>]", lambda match: f"%{ord(match.group()):02X}", url)

"""The :class:`Comparison` of two runs and how it renders.

changes.jsonl (GATE_AND_COMPARE.md §6.9, bytes per §1.3): compact JSON lines,
non-ASCII raw, floats in shortest round-trip form and always with a fraction
or exponent (``3.0``), a non-finite number as ``null``; header first, then one
line per changed case in ascending case_id byte order; ``\\n`` after every
line. The terminal summary is §6.10. A side run with ``--repeat`` adds
``unstable`` lines (with a ``stability`` member), a header ``stability`` block
and summary lines (:mod:`.stability`); without one, every byte is taguru's.
"""

from __future__ import annotations

import functools
import json
import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Final

import polars as pl

from taguru_eval._base.files import write_bytes_atomic
from taguru_eval._base.text import CONTROL_CHARACTERS, one_line
from taguru_eval.compare import display, drivers
from taguru_eval.compare.abstention import AbstentionComparison
from taguru_eval.compare.load import RunView
from taguru_eval.compare.model import (
    NOT_COMPARABLE,
    REGRESSED,
    UNSTABLE,
    base_column,
    delta_column,
    direction_column,
    head_column,
)
from taguru_eval.compare.significance import Significance, significance
from taguru_eval.compare.stability import StabilityComparison, StabilitySide

CHANGES_VERSION: Final = 1
"""``taguru_evaluation_changes`` written in the header."""

SUMMARY_REGRESSED_LIMIT: Final = 10
"""How many regressed records the terminal summary names (§6.10)."""


@dataclass(frozen=True)
class Comparison:
    """The result of comparing BASE with HEAD.

    ``cases``: one row per case_id of either side, ascending byte order, with
    ``kind`` (improved/regressed/added/removed/unchanged, or ``unstable`` for a
    matched case a ``run --repeat`` side found unstable), ``in_base``,
    ``in_head`` and, per comparison metric, ``<metric>.base``, ``.head``,
    ``.delta`` and ``.direction`` columns. ``metrics``: the header's aggregate
    entries (metric, statistic, base, head, delta). ``warnings``: every §6.8
    warning, in order, without the stderr prefix.
    """

    base: RunView
    head: RunView
    cases: pl.DataFrame
    metrics: pl.DataFrame
    warnings: tuple[str, ...]
    counts: Mapping[str, int]
    compared: tuple[str, ...]
    """The per-case metrics cases were classified by, in order."""
    abstention: AbstentionComparison | None = None
    """Must-refuse verdict flips (ABSTENTION.md §3.10); None when neither side has any."""
    answers: Mapping[str, object] | None = None
    """The header's ``answers`` block: each side's ``inputs.answers`` and whether cases
    were classified on ``answers.*`` (only when both sides have them); None when
    neither side was given --answers."""
    stability: StabilityComparison | None = None
    """The header's ``stability`` block and the verdicts of the cases classified
    ``unstable`` (:mod:`.stability`); None when neither side was run with --repeat."""
    selection: Mapping[str, object] | None = None
    """The header's ``selection`` block — how many cases are ``not_comparable``
    (one side did not run them) and each side's ``inputs.selection`` — when a side
    ran a selection (``--sample``, ``--filter``, ``--tag``, ``--failing``); else None."""

    def changed(self) -> pl.DataFrame:
        """The cases that get a changes.jsonl line: every kind but unchanged and
        not_comparable (a case one side did not run is counted in the header only:
        a 100-case sample against a 20,000-case run is not 19,900 lines of nothing)."""
        return self.cases.filter(~pl.col("kind").is_in(["unchanged", NOT_COMPARABLE]))

    def regressed(self) -> pl.DataFrame:
        """The regressed cases only."""
        return self.cases.filter(pl.col("kind") == REGRESSED)

    def records(self) -> list[dict[str, object]]:
        """The per-case lines of changes.jsonl as Python objects."""
        return records(self)

    def header(
        self, generated_at: str | None = None, extra: Mapping[str, object] | None = None
    ) -> dict[str, object]:
        """The changes.jsonl header (``generated_at`` defaults to now, UTC);
        ``extra`` members are appended after taguru's own (an additive block)."""
        return header(self, generated_at, extra)

    def changes_jsonl(
        self, generated_at: str | None = None, extra: Mapping[str, object] | None = None
    ) -> str:
        """The whole changes.jsonl text: header line, one line per changed case."""
        return render_changes(self, generated_at, extra)

    def write_changes(
        self, path: str | os.PathLike[str], extra: Mapping[str, object] | None = None
    ) -> None:
        """Write changes.jsonl atomically (temp file + rename); ``OSError`` on failure."""
        write_bytes_atomic(path, self.changes_jsonl(extra=extra).encode("utf-8"))

    def summary(self, out: str) -> str:
        """The terminal summary (§6.10) for a file written to ``out``."""
        return summary(self, out)

    # The reader's view beside the §6.10 summary (:mod:`.drivers`).

    @functools.cached_property
    def tests(self) -> Significance:
        """The paired tests of ``compare --significance`` at its defaults (Holm over
        one family: the whole run's compared metrics), computed once: the verdicts
        :meth:`moved_metrics` and the notebook display carry."""
        return significance(self)

    def moved_metrics(self) -> pl.DataFrame:
        """Only the aggregate metrics that moved: ``direction`` better / worse by
        the catalog (``changed`` without one), and the significance ``verdict`` of
        :attr:`tests` (``not tested`` for a metric no case-level test covers, e.g.
        latency): only a significant test is called regressed or improved.
        Regressed first, then inconclusive, improved, no significant change, not
        tested; by the size of the move within each."""
        return drivers.moved_metrics(self.metrics, tests=self.tests.frame)

    def case_drivers(self) -> pl.DataFrame:
        """Per improved/regressed case: the metric(s) that drove it, and those against."""
        return drivers.case_drivers(self.cases, self.compared)

    def driver_groups(self, examples: int = drivers.EXAMPLES) -> pl.DataFrame:
        """The changed cases grouped by kind and drivers, one line per group."""
        return drivers.driver_groups(self.case_drivers(), examples=examples)

    def __repr__(self) -> str:
        return display.comparison_repr(self.base, self.head, self.counts)

    def _repr_html_(self) -> str:
        return display.comparison_html(
            self.base,
            self.head,
            self.counts,
            self.moved_metrics(),
            self.driver_groups(),
            tests=self.tests,
        )


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
    """Compact JSON, non-ASCII raw, control characters escaped (§1.3) — C1 and the
    bidirectional controls too, as ``\\u0085``: the same JSON string, without the
    raw character a CI log would show (serde_json writes those raw)."""
    return _UNSAFE.sub(_json_escape, _ENCODER.encode(value))


_UNSAFE: Final = re.compile(CONTROL_CHARACTERS)


def _json_escape(match: re.Match[str]) -> str:
    # Only ever inside a JSON string: every character outside one is ASCII.
    return f"\\u{ord(match.group()):04x}"


def header(
    comparison: Comparison,
    generated_at: str | None = None,
    extra: Mapping[str, object] | None = None,
) -> dict[str, object]:
    """The header object, keys in §6.9 order, then any ``extra`` members."""
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
    if comparison.abstention is not None:
        doc["abstention"] = comparison.abstention.to_json()
    if comparison.answers is not None:
        doc["answers"] = dict(comparison.answers)
    if comparison.stability is not None:
        doc["stability"] = comparison.stability.header_block()
    if comparison.selection is not None:
        doc["selection"] = dict(comparison.selection)
    if comparison.warnings:
        doc["warnings"] = list(comparison.warnings)
    clash = sorted(set(extra or {}).intersection(doc))
    if clash:
        raise ValueError(f"extra header members would replace taguru's own: {clash}")
    doc.update(extra or {})
    return doc


# Python's repr (the reference spelling, §1.3) is positional exactly for
# 1e-4 <= |v| < 1e16 (and zero); there Polars' Float64 -> String cast prints
# the same shortest round-trip digits the same way, so those numbers are
# formatted in Polars. The rare others go through repr one by one.
_REPR_POSITIONAL_MIN: Final = 1e-4
_REPR_POSITIONAL_END: Final = 1e16

_NEEDS_ESCAPE: Final = rf'["\\\t\n\r]|{CONTROL_CHARACTERS}'
"""A case_id holding any of these needs JSON escaping (rare): done by :func:`_dumps`."""


def _number_text(series: pl.Series) -> pl.Series:
    """Every value of a Float64 column spelled as :func:`_number` spells it."""
    frame = pl.DataFrame({"v": series})
    v = pl.col("v")
    magnitude = v.abs()
    positional = (v == 0) | (
        (magnitude >= _REPR_POSITIONAL_MIN) & (magnitude < _REPR_POSITIONAL_END)
    )
    text = frame.select(
        pl.when(v.is_null() | ~v.is_finite())
        .then(pl.lit("null"))
        .when(positional)
        .then(v.cast(pl.String))
        .otherwise(pl.lit(None, dtype=pl.String))
        .alias("text")
    ).get_column("text")
    exponent_rows = text.is_null().arg_true()
    if exponent_rows.len():
        values = series.gather(exponent_rows).to_list()
        text = text.scatter(exponent_rows, [_number(value) for value in values])
    return text


def _record_text(comparison: Comparison) -> str:
    """One compact JSON line per changed case, joined by ``\\n`` (no final
    newline; ``""`` when nothing changed), built from whole columns.

    Each metric entry and each line is assembled by Polars string
    expressions rather than ``json.dumps`` per record: the metric names are
    fixed ASCII, the numbers follow :func:`_number` (see :func:`_number_text`)
    and only a case_id can need escaping — this is the hot path of a
    100,000-case compare.
    """
    changed = comparison.changed()
    if changed.height == 0:
        return ""
    numbers = {
        column: _number_text(changed.get_column(column))
        for metric in comparison.compared
        for column in (base_column(metric), head_column(metric), delta_column(metric))
    }
    case_ids = changed.get_column("case_id")
    quoted = ('"' + case_ids + '"').alias("quoted")
    escape_rows = case_ids.str.contains(_NEEDS_ESCAPE).fill_null(False).arg_true()
    if escape_rows.len():
        ids = case_ids.gather(escape_rows).to_list()
        quoted = quoted.scatter(escape_rows, [_dumps(case_id) for case_id in ids])
    frame = changed.select("kind", *[pl.col(direction_column(m)) for m in comparison.compared])
    frame = frame.with_columns(
        quoted, *[text.alias(f"{name}.text") for name, text in numbers.items()]
    )

    def entry(metric: str) -> pl.Expr:
        direction = pl.col(direction_column(metric))
        delta = (
            pl.when(direction == NOT_COMPARABLE)
            .then(pl.lit("null"))
            .otherwise(pl.col(f"{delta_column(metric)}.text"))
        )
        text = pl.concat_str(
            pl.lit(f'{{"metric":{_dumps(metric)},"sides":{{"base":'),
            pl.col(f"{base_column(metric)}.text"),
            pl.lit(',"head":'),
            pl.col(f"{head_column(metric)}.text"),
            pl.lit('},"delta":'),
            delta,
            pl.lit(',"direction":"'),
            direction,
            pl.lit('"}'),
        )
        # concat_str is null when the direction is: the metric is not recorded.
        return text

    # Joined with "," skipping the unrecorded (null) entries; none at all -> "".
    entries = pl.concat_str(
        [entry(metric) for metric in comparison.compared], separator=",", ignore_nulls=True
    )
    parts = [
        pl.lit('{"kind":"'),
        pl.col("kind"),
        pl.lit('","case_id":'),
        pl.col("quoted"),
        pl.lit(',"metrics":['),
        entries,
        pl.lit("]"),
    ]
    if comparison.stability is not None:
        # An unstable record says why: each side's verdict (few lines, built in Python).
        members = comparison.stability.record_members()
        texts = [
            None if member is None else f',"stability":{_dumps(member)}'
            for member in (members.get(case_id) for case_id in case_ids.to_list())
        ]
        frame = frame.with_columns(pl.Series("stability", texts, dtype=pl.String))
        parts.append(pl.col("stability").fill_null(""))
    line = pl.concat_str(*parts, pl.lit("}"))
    # Joined inside Polars: one Python string instead of one per case.
    joined = frame.select(line.str.join("\n")).item()
    assert isinstance(joined, str)
    return joined


def records(comparison: Comparison) -> list[dict[str, object]]:
    """The per-case lines as Python objects (parsed from the same rendering)."""
    text = _record_text(comparison)
    parsed: list[dict[str, object]] = [json.loads(line) for line in text.split("\n") if line]
    return parsed


def render_changes(
    comparison: Comparison,
    generated_at: str | None = None,
    extra: Mapping[str, object] | None = None,
) -> str:
    """The whole changes.jsonl text, ``\\n`` after every line."""
    records = _record_text(comparison)
    head = _dumps(header(comparison, generated_at, extra))
    return f"{head}\n{records}\n" if records else f"{head}\n"


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
            for metric in comparison.compared
            if row[direction_column(metric)] == REGRESSED
        ]
        lines.append(f"    regressed: {row['case_id']} ({', '.join(parts)})")
    if regressed.height > SUMMARY_REGRESSED_LIMIT:
        lines.append(
            f"    ... and {regressed.height - SUMMARY_REGRESSED_LIMIT} more regressed case(s)"
        )
    if comparison.stability is not None:
        lines.extend(stability_summary(comparison.stability))
    if comparison.selection is not None:
        lines.append(selection_summary(comparison.selection))
    if comparison.abstention is not None:
        lines.extend(abstention_summary(comparison.abstention))
    if comparison.answers is not None:
        lines.append(answers_summary(comparison.answers))
    lines.append(f"  wrote {out}")
    # Case ids, metric names and kinds come from the two files, the path from the
    # command line: a control character in one is escaped rather than sent to
    # the terminal; a line without one keeps §6.10's bytes.
    return "".join(f"{one_line(line)}\n" for line in lines)


def selection_summary(block: Mapping[str, object]) -> str:
    """The line saying how many cases were not compared, and which side selected."""
    sides = [
        f"{name.upper()} ran {selected.get('cases')} of {selected.get('eval_cases')} case(s)"
        for name in ("base", "head")
        if isinstance(selected := block.get(name), Mapping)
    ]
    return (
        f"  selection: {block.get('not_comparable')} case(s) not comparable, run on one side "
        f"only ({'; '.join(sides)}); the counts and significance are over the cases both ran"
    )


def _side_stability(name: str, side: StabilitySide | None) -> str:
    if side is None:
        return f"{name}: no verdicts (not run with --repeat)"
    summary = side.summary()
    return f"{name}: {summary['unstable']} unstable over {summary['repeats']} repetition(s)"


def stability_summary(block: StabilityComparison) -> list[str]:
    """The stability lines of the summary: the tally, then the unstable cases by name."""
    lines = [
        f"  stability: {block.unstable} case(s) unstable on either side, not classified "
        f"({_side_stability('BASE', block.base)}; {_side_stability('HEAD', block.head)})"
    ]
    for row in block.cases.head(SUMMARY_REGRESSED_LIMIT).iter_rows(named=True):
        parts = [
            f"{side.upper()} differs: {', '.join(row[f'{side}_differs'] or []) or 'none'}"
            for side in ("base", "head")
            if row[f"{side}_unstable"] is not None
        ]
        lines.append(f"    {UNSTABLE}: {row['case_id']} ({'; '.join(parts)})")
    if block.cases.height > SUMMARY_REGRESSED_LIMIT:
        lines.append(
            f"    ... and {block.cases.height - SUMMARY_REGRESSED_LIMIT} more unstable case(s)"
        )
    return lines


def answers_summary(block: Mapping[str, object]) -> str:
    """The terminal line saying whether cases were classified on ``answers.*``."""
    if block.get("classified"):
        return "  answers: cases classified on answers.hit_at_k, answers.mrr, answers.coverage too"
    side = "BASE" if block.get("base") is not None else "HEAD"
    return f"  answers: only {side} was given --answers; cases not classified on answers.*"


def abstention_summary(block: AbstentionComparison) -> list[str]:
    """The must-refuse lines of the summary: the tally, then every flip by name."""
    counts = block.counts
    lines = [
        f"  must-refuse: {counts['improved']} improved, {counts['regressed']} regressed, "
        f"{counts['unchanged']} unchanged, {counts['added']} added, {counts['removed']} "
        f"removed, {counts['not_comparable']} not comparable"
    ]
    flips = block.changes.filter(pl.col("direction").is_in(["improved", "regressed"]))
    lines.extend(
        f"    {direction}: {case_id} ({kind}) {base} -> {head}"
        for case_id, kind, base, head, direction in flips.iter_rows()
    )
    return lines

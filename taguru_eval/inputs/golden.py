"""Importing a citenexus golden CSV (ABSTENTION.md §4): what maps, and what does not.

A citenexus golden CSV labels each question with answer text (``expected``,
or the column ``--expected-column`` names); taguru scores *where* evidence is
(a source and a paragraph), and answer text goes to the answers file beside
eval.jsonl (:mod:`taguru_eval.inputs.answers`). :func:`import_golden` reads
the CSV and decides, row by row:

* ``expect_decision=abstain`` → a must-refuse case (``note`` → ``why``); its
  answer text, if any, is not carried (a must-refuse case has no answers);
* ``expect_decision=answer``, or no such column, with a non-blank
  ``expected`` → an eval.jsonl case plus an answers entry (the text trimmed),
  with expected_sources when a document-id column (``--sources-column``,
  mapped through ``--source-template``) gives it a location label;
* ``expect_decision=answer`` with a blank ``expected`` → an eval.jsonl case
  only with a location label; otherwise the question is listed as *needing
  labels* — a case with neither would be accepted and silently measure nothing;
* a blank ``expected`` without ``expect_decision`` is ambiguous (in
  citenexus it means "any answer counts", not "refuse"): the import stops
  (exit 2) unless ``--blank-expected must-refuse|skip`` says what it means.

Nothing is dropped silently: the report lists every row (where it went and
why), every column that was not carried (and why), and warnings for what
citenexus itself would have misread (a BOM, a padded ``expected`` header, an
``expected_support`` column). Nothing here writes a file; the command line
writes the texts atomically.
"""

from __future__ import annotations

import csv
import io
import json
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Literal

from taguru_eval._base.text import trim
from taguru_eval.contract import GOLDEN_CAP
from taguru_eval.errors import InputError
from taguru_eval.inputs.answers import STAMP_KEY as ANSWERS_STAMP_KEY
from taguru_eval.inputs.answers import parse_answers
from taguru_eval.inputs.dataset import load_eval_text
from taguru_eval.inputs.must_refuse import STAMP_KEY, parse_must_refuse
from taguru_eval.inputs.reading import read_utf8

REPORT_STAMP: Final = "taguru_eval_import_report"
BlankExpected = Literal["must-refuse", "skip"]

EVAL: Final = "eval"
ANSWERS: Final = "answers"
MUST_REFUSE: Final = "must_refuse"
NEEDS_LABELS: Final = "needs_labels"
SKIPPED: Final = "skipped"
DESTINATIONS: Final = (EVAL, MUST_REFUSE, NEEDS_LABELS, SKIPPED)
"""Where a row goes: each row goes to exactly one of these."""
COUNTED: Final = (EVAL, ANSWERS, MUST_REFUSE, NEEDS_LABELS, SKIPPED)
"""The report's ``counts``: a row with answer text counts in eval and answers."""

_BOM: Final = "\ufeff"
_KNOWN_DROPS: Final[Mapping[str, str]] = {
    "trap_docs": (
        "sources that must not answer have no field in eval.jsonl or the must-refuse file; in "
        "taguru keeping a source out is a request filter (options.tags), which would make such "
        "a check trivially true"
    ),
    "expected_support": (
        "citenexus ignores this column (it reads 'expected'); it is not carried either"
    ),
}


@dataclass(frozen=True)
class GoldenOptions:
    """The import's knobs (``import-golden``'s flags)."""

    name: str | None = None
    id_prefix: str = "golden"
    id_column: str | None = None
    expected_column: str | None = None
    blank_expected: BlankExpected | None = None
    sources_column: str | None = None
    source_template: str = "{}"


@dataclass
class GoldenImport:
    """What an import produced: the three file texts (None when no row went
    there), the report object, and the sources the eval cases name."""

    eval_text: str | None
    must_refuse_text: str | None
    report: dict[str, Any]
    sources: frozenset[str] = field(default_factory=frozenset)
    answers_text: str | None = None

    @property
    def counts(self) -> dict[str, int]:
        counts: dict[str, int] = self.report["counts"]
        return counts


@dataclass
class _Row:
    number: int  # 1-based data row (the header is row 0)
    line: int  # the CSV line the row starts on
    cells: dict[str, str]


def _read_rows(path: Path, shown: str) -> tuple[list[str], list[_Row], bool]:
    _raw, text = read_utf8(path, shown, GOLDEN_CAP)
    bom = text.startswith(_BOM)
    # strict: an unclosed quote is an error, not the rest of the file read as one cell.
    reader = csv.reader(io.StringIO(text.removeprefix(_BOM), newline=""), strict=True)
    try:
        header = next(reader, None)
        if header is None or not any(cell.strip() for cell in header):
            raise InputError(f"{shown}: empty file: expected a CSV header row", path=shown)
        rows: list[_Row] = []
        line = reader.line_num + 1
        for cells in reader:
            if any(cell.strip() for cell in cells):
                if len(cells) > len(header):
                    raise InputError(
                        f"{shown}: line {line}: {len(cells)} cells but the header has "
                        f"{len(header)} columns",
                        path=shown,
                        line=line,
                    )
                padded = [*cells, *[""] * (len(header) - len(cells))]
                rows.append(_Row(len(rows) + 1, line, dict(zip(header, padded, strict=True))))
            line = reader.line_num + 1
    except csv.Error as exc:
        raise InputError(
            f"{shown}: line {reader.line_num}: not valid CSV: {exc}", path=shown
        ) from None
    # Counted once (a header of 100,000 columns must not be scanned per column).
    duplicates = sorted(name for name, count in Counter(header).items() if count > 1)
    if duplicates:
        raise InputError(f"{shown}: repeated header column(s): {', '.join(duplicates)}", path=shown)
    return header, rows, bom


def _column(header: Sequence[str], wanted: str) -> str | None:
    """The header matching ``wanted`` exactly, else after trimming and case folding."""
    if wanted in header:
        return wanted
    loose = [name for name in header if trim(name).casefold() == wanted]
    return loose[0] if loose else None


class _Importer:
    def __init__(self, shown: str, header: list[str], options: GoldenOptions) -> None:
        self.shown = shown
        self.header = header
        self.options = options
        self.question = _column(header, "question")
        self.query = _column(header, "query")
        self.decision = _column(header, "expect_decision")
        self.note = _column(header, "note")
        self.warnings: list[str] = []
        if self.question is None and self.query is None:
            raise InputError(
                f"{shown}: no 'question' or 'query' column (header: {', '.join(header)})",
                path=shown,
            )
        self.id_column = self._named(options.id_column, "--id-column")
        self.sources_column = self._named(options.sources_column, "--sources-column")
        named_expected = self._named(options.expected_column, "--expected-column")
        for role, taken in (
            ("the question", self.question),
            ("the query", self.query),
            ("expect_decision", self.decision),
            ("--id-column", self.id_column),
            ("--sources-column", self.sources_column),
        ):
            if named_expected is not None and named_expected == taken:
                raise InputError(
                    f"{shown}: --expected-column '{named_expected}' is already read as {role}",
                    path=shown,
                )
        self.expected = named_expected or _column(header, "expected")
        if named_expected is not None and named_expected != "expected":
            self.warnings.append(
                f"answer text was read from '{named_expected}' (--expected-column); citenexus "
                "reads only 'expected', so it would not see these labels"
            )
        for role, name in (
            ("question", self.question),
            ("query", self.query),
            ("expected", None if named_expected is not None else self.expected),
            ("expect_decision", self.decision),
            ("note", self.note),
        ):
            if name is not None and name != role:
                self.warnings.append(
                    f"header '{name}' was read as '{role}'; citenexus matches headers "
                    f"exactly and would not see this column"
                    + (
                        " — every row would be blank-expected to it, and its "
                        "expected_support_rate would become the answer rate"
                        if role == "expected"
                        else ""
                    )
                )
        if self.expected is None:
            self.warnings.append(
                "no 'expected' column: citenexus would treat every row as blank-expected, "
                "so its expected_support_rate would be the raw answer rate"
            )
        if "expected_support" in header:
            self.warnings.append(
                "column 'expected_support' is ignored by citenexus (it reads 'expected'): if "
                "your labels are there, citenexus scored every row as blank-expected"
            )

    def _named(self, name: str | None, flag: str) -> str | None:
        if name is None:
            return None
        if name not in self.header:
            raise InputError(
                f"{self.shown}: {flag} '{name}' is not a column (header: {', '.join(self.header)})",
                path=self.shown,
            )
        return name

    def cell(self, row: _Row, column: str | None) -> str:
        return "" if column is None else row.cells.get(column, "")

    def question_of(self, row: _Row) -> str:
        # citenexus's rule, per row: `question` when non-empty, else `query`.
        question = trim(self.cell(row, self.question))
        return question or trim(self.cell(row, self.query))

    def case_id(self, row: _Row, width: int) -> str:
        if self.id_column is not None:
            return trim(self.cell(row, self.id_column))
        return f"{self.options.id_prefix}-{row.number:0{width}d}"

    def sources(self, row: _Row) -> list[str]:
        if self.sources_column is None:
            return []
        ids = [trim(part) for part in self.cell(row, self.sources_column).split("|")]
        return [self.options.source_template.replace("{}", doc) for doc in ids if doc]


def import_golden(path: str | Path, options: GoldenOptions | None = None) -> GoldenImport:
    """Read a golden CSV and sort every row (see the module docstring).

    Raises :class:`InputError` (exit 2) for an unreadable or malformed CSV, a
    missing question column, an unknown ``--id-column``/``--sources-column``,
    empty or repeated ids, and blank-expected rows without ``--blank-expected``.
    """
    opts = options or GoldenOptions()
    shown = str(path)
    header, rows, bom = _read_rows(Path(path), shown)
    importer = _Importer(shown, header, opts)
    width = max(3, len(str(len(rows))))
    if importer.decision is None and opts.blank_expected is None:
        blank = [row.number for row in rows if not trim(importer.cell(row, importer.expected))]
        column = importer.expected or "expected"
        if blank and importer.expected is None:
            raise InputError(
                f"{shown}: the file has neither an 'expected' nor an 'expect_decision' column, "
                f"so all {len(rows)} row(s) read as blank-expected; in citenexus a blank expected "
                "means 'any answer counts', not 'refuse' — pass --blank-expected must-refuse "
                "or --blank-expected skip",
                path=shown,
            )
        if blank:
            listed = ", ".join(str(number) for number in blank[:20])
            more = f" and {len(blank) - 20} more" if len(blank) > 20 else ""
            raise InputError(
                f"{shown}: {len(blank)} row(s) have a blank '{column}' and the file has no "
                f"'expect_decision' column (rows {listed}{more}); in citenexus a blank expected "
                "means 'any answer counts', not 'refuse' — pass --blank-expected must-refuse "
                "or --blank-expected skip",
                path=shown,
            )

    eval_cases: list[dict[str, Any]] = []
    answers: list[dict[str, Any]] = []
    refusals: list[dict[str, Any]] = []
    detail: list[dict[str, Any]] = []
    needs_labels: list[dict[str, Any]] = []
    seen: dict[str, int] = {}
    for row in rows:
        question = importer.question_of(row)
        case_id = importer.case_id(row, width)
        expected = trim(importer.cell(row, importer.expected))
        sources = importer.sources(row)
        went, why = _route(importer, row, question, expected, sources, opts)
        if went in (EVAL, MUST_REFUSE, NEEDS_LABELS):
            if not case_id:
                raise InputError(
                    f"{shown}: line {row.line}: the --id-column '{importer.id_column}' cell is "
                    "empty",
                    path=shown,
                    line=row.line,
                )
            if case_id in seen:
                raise InputError(
                    f"{shown}: line {row.line}: case_id '{case_id}' repeats row {seen[case_id]}",
                    path=shown,
                    line=row.line,
                )
            seen[case_id] = row.number
        entry: dict[str, Any] = {"row": row.number, "line": row.line}
        if went != SKIPPED:
            entry["case_id"] = case_id
        entry["went"] = went
        entry["why"] = why
        detail.append(entry)
        if went == EVAL:
            eval_cases.append(
                {
                    "case_id": case_id,
                    "query": question,
                    "expected_sources": [
                        {"source": source, "paragraphs": [], "relevance": 1}
                        for source in dict.fromkeys(sources)
                    ],
                }
            )
            if expected:
                answers.append({"case_id": case_id, "answers": [expected]})
        elif went == MUST_REFUSE:
            refusal: dict[str, Any] = {"case_id": case_id, "query": question}
            note = trim(importer.cell(row, importer.note))
            if note:
                refusal["why"] = note
            refusals.append(refusal)
        elif went == NEEDS_LABELS:
            needs_labels.append({"row": row.number, "case_id": case_id, "question": question})

    name = opts.name or Path(path).stem
    eval_text = _jsonl({"taguru_eval": 1, "name": name}, eval_cases) if eval_cases else None
    answers_text = _jsonl({ANSWERS_STAMP_KEY: 1, "name": name}, answers) if answers else None
    refusal_text = _jsonl({STAMP_KEY: 1, "name": name}, refusals) if refusals else None
    # What is written must load as what it claims to be (ids are disjoint by construction).
    if eval_text is not None:
        load_eval_text(eval_text, "eval.jsonl")
    if answers_text is not None:
        parse_answers(answers_text, "answers.jsonl", [case["case_id"] for case in eval_cases])
    if refusal_text is not None:
        parse_must_refuse(refusal_text, "must_refuse.jsonl")

    warnings = list(importer.warnings)
    if bom:
        warnings.append(
            "the file starts with a UTF-8 byte order mark: read here, but citenexus reads plain "
            "utf-8, so its first header would carry the mark and not match"
        )
    if importer.id_column is None and (eval_cases or refusals or needs_labels):
        warnings.append(
            f"case_ids are '{opts.id_prefix}-<row number>': reordering the CSV renumbers them "
            "and breaks compare's continuity — an id column (--id-column) is the fix"
        )
    unlocated = sum(1 for case in eval_cases if not case["expected_sources"])
    if unlocated:
        warnings.append(
            f"{unlocated} eval case(s) carry answer text but no location label: their "
            "expected_sources are empty, so only the answers file scores them"
        )
    if refusals:
        warnings.append(
            "must-refuse kinds are left unspecified: mark each case out_of_corpus or adjacent "
            "by hand (adjacent questions usually surface related text on a correct retriever)"
        )
    counts = dict.fromkeys(COUNTED, 0)
    for entry in detail:
        counts[entry["went"]] += 1
    counts[ANSWERS] = len(answers)
    report: dict[str, Any] = {
        REPORT_STAMP: 1,
        "source": shown,
        "rows": len(rows),
        "counts": counts,
        "columns": _columns(importer, header),
        "rows_detail": detail,
        "needs_labels": needs_labels,
        "warnings": warnings,
    }
    named = frozenset(entry["source"] for case in eval_cases for entry in case["expected_sources"])
    return GoldenImport(eval_text, refusal_text, report, named, answers_text)


def _route(
    importer: _Importer,
    row: _Row,
    question: str,
    expected: str,
    sources: Sequence[str],
    opts: GoldenOptions,
) -> tuple[str, str]:
    """Where one row goes, and why (one sentence a reader can act on); ``expected``
    is the row's answer text trimmed, ``sources`` its location labels."""
    if not question:
        return SKIPPED, "no question: both the 'question' and 'query' cells are empty"
    if importer.decision is not None:
        decision = trim(importer.cell(row, importer.decision)).casefold()
        if decision == "abstain":
            if expected:
                return MUST_REFUSE, (
                    f"expect_decision=abstain; its '{importer.expected}' text is not carried "
                    "(a must-refuse case has no answers)"
                )
            return MUST_REFUSE, "expect_decision=abstain"
        if decision != "answer":
            shown = decision or "(blank)"
            return SKIPPED, f"expect_decision is '{shown}', neither 'answer' nor 'abstain'"
    elif not expected:
        if opts.blank_expected == "must-refuse":
            return MUST_REFUSE, "blank expected, imported as must-refuse (--blank-expected)"
        return SKIPPED, "blank expected, skipped (--blank-expected skip)"
    reason = (
        f"its '{importer.sources_column}' cell is empty"
        if importer.sources_column is not None
        else "no document-id column was mapped (--sources-column)"
    )
    if expected:
        answer = f"answer text from '{importer.expected}' to the answers file"
        if sources:
            return EVAL, f"{answer}; expected_sources from '{importer.sources_column}'"
        return EVAL, f"{answer}; no expected_sources, as {reason}"
    if sources:
        return EVAL, f"answerable; expected_sources from '{importer.sources_column}'"
    blank = "no expected column" if importer.expected is None else f"'{importer.expected}' is blank"
    return NEEDS_LABELS, (
        f"answerable, but it has neither answer text ({blank}) nor a location label "
        f"({reason}); a case without either would measure nothing"
    )


def _columns(importer: _Importer, header: Sequence[str]) -> dict[str, Any]:
    mapped: dict[str, str] = {}
    for column, meaning in (
        (importer.question, "query (preferred per row when non-empty)"),
        (importer.query, "query (when 'question' is empty)"),
        (importer.expected, "answers file (trimmed); a blank cell carries no answer"),
        (importer.decision, "routing: answer -> eval.jsonl, abstain -> must-refuse file"),
        (importer.note, "must-refuse 'why'"),
        (importer.id_column, "case_id"),
        (importer.sources_column, f"expected_sources via '{importer.options.source_template}'"),
    ):
        if column is not None:
            mapped[column] = meaning
    dropped = []
    for column in header:
        if column in mapped:
            continue
        if column == "expected":
            why = f"not the answer column: --expected-column names '{importer.expected}'"
        elif column == "correct_docs" and importer.sources_column is None:
            why = (
                "looks like document ids; pass --sources-column correct_docs with "
                "--source-template to turn them into expected_sources"
            )
        else:
            why = _KNOWN_DROPS.get(column, "no field in eval.jsonl or the must-refuse file")
        dropped.append({"column": column, "why": why})
    return {"mapped": mapped, "dropped": dropped}


def _jsonl(header: dict[str, Any], rows: Sequence[dict[str, Any]]) -> str:
    lines = [json.dumps(header, ensure_ascii=False)]
    lines.extend(json.dumps(row, ensure_ascii=False) for row in rows)
    return "\n".join(lines) + "\n"


def report_text(report: Mapping[str, Any]) -> str:
    """The report file's text (pretty JSON, non-ASCII raw, final newline)."""
    return json.dumps(report, ensure_ascii=False, indent=2) + "\n"

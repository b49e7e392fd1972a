"""The answers file (``--answers FILE``): answer text per eval case, beside eval.jsonl.

Kept out of eval.jsonl so that file stays readable by taguru's own evaluate::

    {"taguru_eval_answers": 1, "name": "handbook answers"}
    {"case_id": "leave-days", "answers": ["twenty days", "20 days"]}

The first non-blank line is the header (closed object, stamp equality-checked,
optional ``name``); every later non-blank line is one case (closed object):
``case_id`` names an eval.jsonl case, at most once; ``answers`` is a non-empty
list of strings, each non-empty after trimming Unicode White_Space. Unlike the
other loaders, every problem of the file is reported, one stderr line each
(``file:line: field: …``), in one :class:`~taguru_eval.errors.LinesError`
(exit 2), before any network call — a hand-written answers file usually has
more than one typo.
"""

from __future__ import annotations

import hashlib
from collections.abc import Collection, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from taguru_eval._base import jsonstrict as js
from taguru_eval._base.text import split_lines, trim
from taguru_eval.contract import ANSWERS_CAP
from taguru_eval.errors import PREFIX, LinesError
from taguru_eval.inputs.reading import read_utf8
from taguru_eval.options import AnswerMatch

ANSWERS_STAMP: Final = 1
STAMP_KEY: Final = "taguru_eval_answers"

MAX_REPORTED: Final = 50
"""Problems listed before the rest are counted in one closing line."""

_HEADER_FIELDS: Final = (STAMP_KEY, "name")
_CASE_FIELDS: Final = ("case_id", "answers")


@dataclass(frozen=True, slots=True)
class AnswerSet:
    """A loaded answers file: ``label`` is the path as given, ``sha256`` the hex
    digest of its bytes, ``by_case`` each case's answers as written (untrimmed)."""

    label: str
    name: str | None
    by_case: Mapping[str, tuple[str, ...]]
    sha256: str

    @property
    def declared(self) -> dict[str, int]:
        """Case id -> how many answers it lists."""
        return {case_id: len(answers) for case_id, answers in self.by_case.items()}

    def inputs_block(self, match: AnswerMatch) -> dict[str, object]:
        """``inputs.answers`` of evaluation.json."""
        return {"path": self.label, "cases": len(self.by_case), "match": match}


def load_answers(
    path: str | Path, eval_case_ids: Collection[str], label: str | None = None
) -> AnswerSet:
    """Load and validate ``path`` against the eval.jsonl ids; every problem of the
    file is one line of the :class:`LinesError` raised (exit 2)."""
    shown = str(path) if label is None else label
    raw, text = read_utf8(path, shown, ANSWERS_CAP)
    name, by_case = parse_answers(text, shown, eval_case_ids)
    return AnswerSet(
        label=shown, name=name, by_case=by_case, sha256=hashlib.sha256(raw).hexdigest()
    )


def parse_answers(
    text: str, label: str, eval_case_ids: Collection[str]
) -> tuple[str | None, dict[str, tuple[str, ...]]]:
    """The header name and each case's answers (see the module docstring)."""
    reader = _Reader(label, frozenset(eval_case_ids))
    name = reader.read(text)
    if reader.problems:
        shown = [f"{PREFIX}{problem}" for problem in reader.problems[:MAX_REPORTED]]
        hidden = len(reader.problems) - MAX_REPORTED
        if hidden > 0:
            shown.append(f"{PREFIX}{label}: … and {hidden} more problems")
        error = LinesError(shown)
        if text.startswith(js.BOM):
            error.add_hint(js.BOM_HINT)
        raise error
    return name, reader.by_case


class _Reader:
    def __init__(self, label: str, eval_ids: frozenset[str]) -> None:
        self.label = label
        self.eval_ids = eval_ids
        self.problems: list[str] = []
        self.by_case: dict[str, tuple[str, ...]] = {}
        self.first_line: dict[str, int] = {}

    def problem(self, line_no: int, field: str, message: str) -> None:
        self.problems.append(f"{self.label}:{line_no}: {field}: {message}")

    def read(self, text: str) -> str | None:
        name: str | None = None
        header_seen = False
        for line_no, line in _lines(text):
            try:
                value = js.loads(line)
            except js.JsonSyntaxError as exc:
                self.problem(line_no, "(line)", f"not JSON: {exc}")
                header_seen = True  # a broken first line is its header's problem
                continue
            if not header_seen:
                header_seen = True
                name = self.header(value, line_no)
                continue
            self.case(value, line_no)
        if not header_seen:
            self.problems.append(f"{self.label}:1: {STAMP_KEY}: empty file: expected a header")
        elif not self.by_case and not self.problems:
            self.problems.append(f"{self.label}:1: (file): no cases after the header")
        return name

    def header(self, value: object, line_no: int) -> str | None:
        try:
            obj = js.read_closed_object(value, (), _HEADER_FIELDS, required=(STAMP_KEY,))
            found = js.read_u64(obj[STAMP_KEY], (STAMP_KEY,))
            name = js.read_optional(obj.get("name"), ("name",), js.read_str)
        except js.JsonShapeError as exc:
            self.problem(line_no, exc.field or STAMP_KEY, f"not an answers header: {exc.reason}")
            return None
        if found != ANSWERS_STAMP:
            self.problem(line_no, STAMP_KEY, f"must be {ANSWERS_STAMP}, got {found}")
        return name

    def case(self, value: object, line_no: int) -> None:
        try:
            obj = js.read_closed_object(value, (), _CASE_FIELDS, required=_CASE_FIELDS)
            case_id = js.read_str(obj["case_id"], ("case_id",))
            answers = js.read_str_array(obj["answers"], ("answers",))
        except js.JsonShapeError as exc:
            self.problem(line_no, exc.field or "(line)", exc.reason)
            return
        ok = True
        if case_id not in self.eval_ids:
            self.problem(line_no, "case_id", f"'{case_id}' is not a case of the eval set")
            ok = False
        elif case_id in self.first_line:
            self.problem(
                line_no,
                "case_id",
                f"'{case_id}' appears again (first on line {self.first_line[case_id]})",
            )
            ok = False
        if not answers:
            self.problem(line_no, "answers", "must list at least one answer")
            ok = False
        for index, answer in enumerate(answers):
            if not trim(answer):
                self.problem(line_no, f"answers[{index}]", "must not be empty")
                ok = False
        if ok:
            self.first_line[case_id] = line_no
            self.by_case[case_id] = tuple(answers)


def _lines(text: str) -> Iterator[tuple[int, str]]:
    for index, raw in enumerate(split_lines(text)):
        line = trim(raw)
        if line:
            yield index + 1, line

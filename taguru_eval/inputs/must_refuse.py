"""The must-refuse file (``--must-refuse FILE``): load and validate it (ABSTENTION.md §3.2).

A hand-written JSONL file with its own stamp, so it can never be mistaken for
an eval.jsonl in either direction::

    {"taguru_eval_must_refuse": 1, "name": "sake must-refuse"}
    {"case_id": "mr-france", "query": "What is the capital of France?", "kind": "out_of_corpus"}
    {"case_id": "mr-deposit", "query": "…", "cues": ["security deposit"], "kind": "adjacent",
     "why": "no deposit clause", "options": {"limit": 10}}

The loader is as strict as the eval.jsonl loader (:mod:`.dataset`): the first
non-blank line is the header (closed object, stamp equality-checked), every
later non-blank line is one case (closed object); the first problem ends the
load with an :class:`~taguru_eval.errors.InputError` naming the file, the
line and the field (exit 2). Case ids are unique within the file and
disjoint from the eval.jsonl case ids (checked here, at step 4a of
EVALUATE.md §2.3, before any network call). ``options`` has eval.jsonl's
types and ranges (limit 1..=1000, floor 0..=1), checked at load time.
"""

from __future__ import annotations

import hashlib
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final, Literal

from taguru_eval._base import jsonstrict as js
from taguru_eval._base.text import display_f32, trim
from taguru_eval.contract import MUST_REFUSE_CAP
from taguru_eval.errors import InputError
from taguru_eval.inputs.dataset import MAX_LIMIT, CaseOptions
from taguru_eval.inputs.reading import jsonl_values, read_header, read_utf8

MUST_REFUSE_STAMP: Final = 1
STAMP_KEY: Final = "taguru_eval_must_refuse"

Kind = Literal["out_of_corpus", "adjacent", "unspecified"]
KINDS: Final[tuple[Kind, ...]] = ("out_of_corpus", "adjacent", "unspecified")
"""``kind`` values; ``unspecified`` is what an absent ``kind`` means (never written)."""
DECLARABLE_KINDS: Final = ("out_of_corpus", "adjacent")

_HEADER_FIELDS: Final = (STAMP_KEY, "name")
_CASE_FIELDS: Final = ("case_id", "query", "cues", "kind", "why", "options")
_OPTION_FIELDS: Final = ("limit", "floor", "tags", "since", "until")


@dataclass(frozen=True, slots=True)
class MustRefuseCase:
    """One must-refuse question; ``line`` is its 1-based file line.

    ``cues`` never falls back to the query (a question-length cue
    containment-matches stored names by construction).
    """

    case_id: str
    query: str
    line: int
    cues: tuple[str, ...] = ()
    kind: Kind = "unspecified"
    why: str | None = None
    options: CaseOptions = field(default_factory=CaseOptions)

    @property
    def effective_limit(self) -> int:
        """``options.limit`` if present, else evaluate's default 10."""
        return self.options.effective_limit


@dataclass(frozen=True, slots=True)
class MustRefuseSet:
    """A loaded must-refuse file: ``label`` is the path as given, ``sha256`` the
    hex digest of its bytes (``inputs.must_refuse``)."""

    label: str
    name: str | None
    cases: tuple[MustRefuseCase, ...]
    sha256: str

    @property
    def case_ids(self) -> list[str]:
        return [case.case_id for case in self.cases]

    def inputs_block(self, refusal_rule: str) -> dict[str, object]:
        """``inputs.must_refuse`` of evaluation.json (ABSTENTION.md §3.8)."""
        return {
            "path": self.label,
            "name": self.name,
            "cases": len(self.cases),
            "sha256": self.sha256,
            "refusal_rule": refusal_rule,
        }


def load_must_refuse(
    path: str | Path, eval_case_ids: Collection[str] = (), label: str | None = None
) -> MustRefuseSet:
    """Load and validate ``path``; every problem is an :class:`InputError` (exit 2).

    ``eval_case_ids`` are the loaded eval.jsonl ids the file's ids must not
    repeat; ``label`` (default: ``path`` as given) prefixes every message.
    """
    shown = str(path) if label is None else label
    raw, text = read_utf8(path, shown, MUST_REFUSE_CAP)
    name, cases = parse_must_refuse(text, shown, eval_case_ids)
    return MustRefuseSet(
        label=shown, name=name, cases=tuple(cases), sha256=hashlib.sha256(raw).hexdigest()
    )


def parse_must_refuse(
    text: str, label: str, eval_case_ids: Collection[str] = ()
) -> tuple[str | None, list[MustRefuseCase]]:
    """The header name and the cases of must-refuse ``text`` (see the module docstring)."""
    eval_ids = frozenset(eval_case_ids)
    name: str | None = None
    header_seen = False
    cases: list[MustRefuseCase] = []
    seen: set[str] = set()
    for line_no, value in jsonl_values(text, label):
        if not header_seen:
            name = _header(value, label, line_no)
            header_seen = True
            continue
        case = _CaseReader(label, line_no).read(value, seen, eval_ids)
        seen.add(case.case_id)
        cases.append(case)
    if not header_seen:
        raise InputError(f"{label}: empty file: expected a {STAMP_KEY} header line", path=label)
    if not cases:
        raise InputError(
            f"{label}: no cases: expected at least one must-refuse case line after the header",
            path=label,
        )
    return name, cases


def _header(value: object, label: str, line_no: int) -> str | None:
    if isinstance(value, dict) and "taguru_eval" in value and STAMP_KEY not in value:
        raise InputError(
            f"{label}: line {line_no}: this is an eval.jsonl header; a must-refuse file "
            f'starts with {{"{STAMP_KEY}": {MUST_REFUSE_STAMP}}}',
            path=label,
            line=line_no,
            field="taguru_eval",
        )
    return read_header(
        value,
        label,
        line_no,
        fields=_HEADER_FIELDS,
        stamp_key=STAMP_KEY,
        stamp=MUST_REFUSE_STAMP,
        kind="must-refuse",
    )


class _CaseReader:
    """One case line: structural typing first, then the value checks in field order."""

    def __init__(self, label: str, line_no: int) -> None:
        self.label = label
        self.line_no = line_no

    def fail(self, message: str, field: str | None) -> InputError:
        return InputError(
            f"{self.label}: line {self.line_no}: {message}",
            path=self.label,
            line=self.line_no,
            field=field,
        )

    def read(
        self, value: object, seen: Collection[str], eval_ids: Collection[str]
    ) -> MustRefuseCase:
        try:
            obj = js.read_closed_object(value, (), _CASE_FIELDS, required=("case_id", "query"))
            case_id = js.read_str(obj["case_id"], ("case_id",))
            query = js.read_str(obj["query"], ("query",))
            cues = js.read_str_array(obj.get("cues", []), ("cues",))
            kind = js.read_optional(obj.get("kind"), ("kind",), js.read_str)
            why = js.read_optional(obj.get("why"), ("why",), js.read_str)
            options = _options(obj.get("options", {}))
        except js.JsonShapeError as exc:
            raise self.fail(
                f"not a valid must-refuse case: {exc.detail}", exc.field or None
            ) from None
        if not trim(case_id):
            raise self.fail("case_id must not be empty", "case_id")
        in_case = f"case '{case_id}'"
        if not trim(query):
            raise self.fail(f"{in_case}: query must not be empty", "query")
        if case_id in seen:
            raise self.fail(f"duplicate case_id '{case_id}'", "case_id")
        if case_id in eval_ids:
            raise self.fail(
                f"case_id '{case_id}' is also an eval.jsonl case_id "
                "(the must-refuse and eval case_ids must be disjoint)",
                "case_id",
            )
        for index, cue in enumerate(cues):
            if not trim(cue):
                raise self.fail(f"{in_case}: cues: entries must not be empty", f"cues[{index}]")
        if kind is not None and kind not in DECLARABLE_KINDS:
            raise self.fail(
                f"{in_case}: kind must be 'out_of_corpus' or 'adjacent', got '{kind}'", "kind"
            )
        if options.limit is not None and not 1 <= options.limit <= MAX_LIMIT:
            raise self.fail(
                f"{in_case}: options.limit: must be 1..={MAX_LIMIT}, got {options.limit}",
                "options.limit",
            )
        if options.floor is not None and not 0.0 <= options.floor <= 1.0:
            raise self.fail(
                f"{in_case}: options.floor must be 0.0..=1.0, got {display_f32(options.floor)}",
                "options.floor",
            )
        return MustRefuseCase(
            case_id=case_id,
            query=query,
            line=self.line_no,
            cues=tuple(cues),
            kind="unspecified" if kind is None else _KIND[kind],
            why=why,
            options=options,
        )


_KIND: Final[dict[str, Kind]] = {"out_of_corpus": "out_of_corpus", "adjacent": "adjacent"}


def _options(value: object) -> CaseOptions:
    path: js.JsonPath = ("options",)
    obj = js.read_closed_object(value, path, _OPTION_FIELDS)
    return CaseOptions(
        limit=js.read_optional(obj.get("limit"), (*path, "limit"), js.read_usize),
        floor=js.read_optional(obj.get("floor"), (*path, "floor"), js.read_f32),
        tags=tuple(js.read_optional(obj.get("tags"), (*path, "tags"), js.read_str_array) or ()),
        since=js.read_optional(obj.get("since"), (*path, "since"), js.read_u64),
        until=js.read_optional(obj.get("until"), (*path, "until"), js.read_u64),
    )

"""eval.jsonl: load, validate and expose one evaluation set (EVALUATE.md §1).

:func:`load_eval` reads the file exactly as taguru's loader does in
*interpret* mode (the mode ``evaluate`` uses): the first non-blank line is the
header (closed object, stamp ``taguru_eval`` must equal 1), every later
non-blank line is one case (closed object, checked in steps A–F, the first
failure wins). Every refusal is an :class:`~taguru_eval.errors.InputError`
whose message is the spec's exact text (``{label}: line {n}: …``) and whose
``path``/``line``/``field`` locate the problem. ``mode="carry_through"``
reproduces the second mode the reference's loader has (§1.4, used by
``taguru benchmark search``); evaluate never uses it.

:func:`validate_limits` is §1.5 (``options.limit`` within 1..=1000), run by the
caller after a successful load.

The ``expected`` table
----------------------
:attr:`EvalSet.expected` is a Polars frame with one row per expected item, so
that matching expectations to what the server returned is a join (its schema
is :data:`taguru_eval.tables.schemas.EXPECTED`, keyed like the run tables):

==================  ==========  ==========================================================
column              dtype       meaning
==================  ==========  ==========================================================
case_id             String      the case's id (exactly as written)
case_index          Int32       0-based position of the case in the file
kind                String      ``source`` | ``concept`` | ``label`` | ``association`` |
                                ``citation``
entry_index         Int32       index of the declaring entry in its list
                                (``expected_sources[i]``, ``expected_concepts[i]`` …)
item_index          Int32       0-based row number within (case, kind)
source              String      ``source`` and ``citation`` rows; else null
paragraph           Int64       ``source`` rows: one listed paragraph, or null when the
                                entry lists none (any paragraph of the source matches);
                                ``citation`` rows: the cited paragraph; else null
relevance           Int64       ``source`` rows only (0..=3); else null
text                String      ``concept`` / ``label`` rows: the entry as written
subject             String      ``association`` rows only
label               String      ``association`` rows only
object              String      ``association`` rows only
section_declared    Boolean     ``citation`` rows: whether the ``section`` key was present
section             String      ``citation`` rows: the declared section; null when absent
                                *or* declared null — tell them apart with section_declared
quote               String      ``citation`` rows: the declared quote, or null
==================  ==========  ==========================================================

An ``expected_sources`` entry with ``paragraphs: [2, 5]`` becomes two rows
sharing one ``entry_index`` (recall counts one judged item per entry, §4.2, so
scoring groups by ``entry_index``); a paragraph listed twice in one entry
yields one row (matching is set membership, §4.1). Rows are ordered by case,
then kind in the order above, then declaration order.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Final, Literal, TypeVar

import polars as pl

from taguru_eval._base import jsonstrict as js
from taguru_eval._base.text import display_f32, split_lines, trim
from taguru_eval.contract import DEFAULT_LIMIT
from taguru_eval.errors import InputError
from taguru_eval.inputs.reading import read_utf8
from taguru_eval.tables.schemas import EXPECTED

MAX_LIMIT: Final = 1000
EVAL_STAMP: Final = 1

LoadMode = Literal["interpret", "carry_through"]
T = TypeVar("T")


class Absent(enum.Enum):
    """Marker for "the key was not in the file" where ``null`` means something else."""

    ABSENT = "absent"

    def __repr__(self) -> str:
        return "ABSENT"


ABSENT: Final = Absent.ABSENT
"""An expected citation's ``section`` when the key is absent (do not check)."""

SectionExpectation = str | None | Absent
"""``ABSENT`` = not checked; ``None`` = outside every section; ``str`` = exactly this."""


@dataclass(frozen=True, slots=True)
class ExpectedSource:
    """One ``expected_sources`` entry; empty ``paragraphs`` = any paragraph."""

    source: str
    paragraphs: tuple[int, ...]
    relevance: int


@dataclass(frozen=True, slots=True)
class ExpectedAssociation:
    """One ``expected_associations`` entry."""

    subject: str
    label: str
    object: str


@dataclass(frozen=True, slots=True)
class ExpectedCitation:
    """One ``expected_citations`` entry (``section`` is three-valued)."""

    source: str
    paragraph: int
    section: SectionExpectation = ABSENT
    quote: str | None = None

    @property
    def section_declared(self) -> bool:
        return self.section is not ABSENT


@dataclass(frozen=True, slots=True)
class CaseOptions:
    """A case's ``options`` (``limit`` range-checked later by validate_limits)."""

    limit: int | None = None
    floor: float | None = None
    tags: tuple[str, ...] = ()
    since: int | None = None
    until: int | None = None

    @property
    def effective_limit(self) -> int:
        """``options.limit`` if present, else the default 10 (§1.5)."""
        return DEFAULT_LIMIT if self.limit is None else self.limit


@dataclass(frozen=True, slots=True)
class EvalCase:
    """One loaded case (EVALUATE.md §1.6); ``line`` is its 1-based file line."""

    case_id: str
    query: str
    line: int
    cues: tuple[str, ...] = ()
    expected_sources: tuple[ExpectedSource, ...] = ()
    expected_concepts: tuple[str, ...] = ()
    expected_labels: tuple[str, ...] = ()
    expected_associations: tuple[ExpectedAssociation, ...] = ()
    expected_citations: tuple[ExpectedCitation, ...] = ()
    options: CaseOptions = CaseOptions()

    @property
    def declares_source_expectation(self) -> bool:
        """At least one expected source with relevance >= 1."""
        return any(entry.relevance >= 1 for entry in self.expected_sources)

    @property
    def has_expectations(self) -> bool:
        """Any expected_sources or expected_concepts entry (the reference's notion)."""
        return bool(self.expected_sources or self.expected_concepts)

    @property
    def runs_structural_lane(self) -> bool:
        return bool(self.expected_concepts or self.expected_labels or self.expected_associations)

    @property
    def runs_citation_lane(self) -> bool:
        return bool(self.expected_citations)

    @property
    def effective_limit(self) -> int:
        return self.options.effective_limit


EXPECTED_KINDS: Final = ("source", "concept", "label", "association", "citation")


@dataclass(frozen=True, eq=False)
class EvalSet:
    """A loaded eval.jsonl: header name, cases in file order, the expected table.

    ``label`` is the ``--eval`` argument as given (``inputs.eval.path``);
    ``name`` the header's name (``inputs.eval.name``). Compared by identity:
    a DataFrame has no boolean equality.
    """

    label: str
    name: str | None
    cases: list[EvalCase]
    expected: pl.DataFrame
    warnings: tuple[str, ...] = ()

    @property
    def case_ids(self) -> list[str]:
        return [case.case_id for case in self.cases]


# --------------------------------------------------------------------------- loading


def load_eval(
    path: str | Path,
    label: str | None = None,
    *,
    mode: LoadMode = "interpret",
    consumer: str = "taguru evaluate",
) -> EvalSet:
    """Load and validate ``path``; ``label`` (default: ``path`` as given) prefixes
    every message. ``consumer`` names the verb in the carry-through warning."""
    shown = str(path) if label is None else label
    _raw, text = read_utf8(path, shown)
    return load_eval_text(text, shown, mode=mode, consumer=consumer)


def load_eval_text(
    text: str,
    label: str,
    *,
    mode: LoadMode = "interpret",
    consumer: str = "taguru evaluate",
) -> EvalSet:
    """:func:`load_eval` on text already read (tests, stdin, in-memory data)."""
    name: str | None = None
    header_seen = False
    cases: list[EvalCase] = []
    seen_ids: set[str] = set()
    carries_extensions = False
    for index, raw_line in enumerate(split_lines(text)):
        line_no = index + 1
        line_text = trim(raw_line)
        if not line_text:
            continue
        try:
            value = js.loads(line_text)
        except js.JsonSyntaxError as exc:
            raise InputError(
                f"{label}: line {line_no}: not JSON: {exc}", path=label, line=line_no
            ) from None
        if not header_seen:
            name = _parse_header(value, label, line_no)
            header_seen = True
            continue
        loader = _CaseLoader(label, line_no)
        case, carries = loader.load(value, seen_ids, interpret=mode == "interpret")
        carries_extensions = carries_extensions or carries
        seen_ids.add(case.case_id)
        cases.append(case)
    if not header_seen:
        raise InputError(f"{label}: empty file: expected a taguru_eval header line", path=label)
    if not cases:
        raise InputError(
            f"{label}: no cases: expected at least one case line after the header", path=label
        )
    warnings: tuple[str, ...] = ()
    if mode == "carry_through" and carries_extensions:
        warnings = (
            f"{label}: this eval.jsonl carries #215-only fields (expected_labels / "
            "expected_associations / expected_citations / options.floor|tags|since|until) — "
            f"{consumer} does not interpret them and passes them through untouched",
        )
    return EvalSet(
        label=label,
        name=name,
        cases=cases,
        expected=expected_frame(cases),
        warnings=warnings,
    )


def validate_limits(eval_set: EvalSet) -> None:
    """§1.5: the first case whose ``options.limit`` is outside 1..=1000 fails."""
    for case in eval_set.cases:
        limit = case.options.limit
        if limit is not None and not 1 <= limit <= MAX_LIMIT:
            raise InputError(
                f"case '{case.case_id}': options.limit must be 1..={MAX_LIMIT}, got {limit}",
                path=eval_set.label,
                line=case.line,
                field="options.limit",
            )


_HEADER_FIELDS: Final = ("taguru_eval", "name", "default_target")


def _parse_header(value: object, label: str, line_no: int) -> str | None:
    try:
        obj = js.read_closed_object(value, (), _HEADER_FIELDS, required=("taguru_eval",))
        stamp = js.read_u64(obj["taguru_eval"], ("taguru_eval",))
        name = js.read_optional(obj.get("name"), ("name",), js.read_str)
    except js.JsonShapeError as exc:
        raise InputError(
            f"{label}: line {line_no}: not a valid eval header: {exc.detail}",
            path=label,
            line=line_no,
            field=exc.field or None,
        ) from None
    if stamp != EVAL_STAMP:
        raise InputError(
            f"{label}: line {line_no}: taguru_eval must be {EVAL_STAMP}, got {stamp}",
            path=label,
            line=line_no,
            field="taguru_eval",
        )
    return name


_CASE_FIELDS: Final = (
    "case_id",
    "query",
    "cues",
    "expected_sources",
    "expected_concepts",
    "options",
    "expected_labels",
    "expected_associations",
    "expected_citations",
)
_SOURCE_FIELDS: Final = ("source", "paragraphs", "relevance")
_OPTION_FIELDS: Final = ("limit", "floor", "tags", "since", "until")
_ASSOCIATION_FIELDS: Final = ("subject", "label", "object")
_CITATION_FIELDS: Final = ("source", "paragraph", "section", "quote")
_EXTENSION_KEYS: Final = ("expected_labels", "expected_associations", "expected_citations")
_EXTENSION_OPTIONS: Final = ("floor", "tags", "since", "until")


class _CaseLoader:
    """Steps A–F of §1.3 for one case line; every error names label, line, field."""

    def __init__(self, label: str, line_no: int) -> None:
        self.label = label
        self.line_no = line_no
        self.where = f"{label}: line {line_no}"

    def fail(self, message: str, field: str | None) -> InputError:
        return InputError(
            f"{self.where}: {message}", path=self.label, line=self.line_no, field=field
        )

    def load(self, value: object, seen_ids: set[str], *, interpret: bool) -> tuple[EvalCase, bool]:
        """The typed case, and whether it carries any #215 extension value."""
        # Step A — structural typing of the closed object.
        try:
            obj = js.read_closed_object(value, (), _CASE_FIELDS, required=("case_id", "query"))
            case_id = js.read_str(obj["case_id"], ("case_id",))
            query = js.read_str(obj["query"], ("query",))
            cues = js.read_str_array(obj.get("cues", []), ("cues",))
            sources = js.read_array(obj.get("expected_sources", []), ("expected_sources",), _source)
            concepts = js.read_str_array(obj.get("expected_concepts", []), ("expected_concepts",))
            options = js.read_closed_object(obj.get("options", {}), ("options",), _OPTION_FIELDS)
            limit = js.read_optional(options.get("limit"), ("options", "limit"), js.read_usize)
        except js.JsonShapeError as exc:
            raise self.fail(f"not a valid eval case: {exc.detail}", exc.field or None) from None

        # Step B, C, D.
        if not trim(case_id):
            raise self.fail("case_id must not be empty", "case_id")
        in_case = f"case '{case_id}'"
        if not trim(query):
            raise self.fail(f"{in_case}: query must not be empty", "query")
        if case_id in seen_ids:
            raise self.fail(f"duplicate case_id '{case_id}'", "case_id")

        # Step E — both checks per entry, entries in order.
        for index, entry in enumerate(sources):
            if not trim(entry.source):
                raise self.fail(
                    f"{in_case}: expected_sources: source must not be empty",
                    f"expected_sources[{index}].source",
                )
            if entry.relevance > 3:
                raise self.fail(
                    f"{in_case}: expected_sources relevance must be 0..=3, got {entry.relevance}",
                    f"expected_sources[{index}].relevance",
                )

        carries = any(obj.get(key) is not None for key in _EXTENSION_KEYS) or any(
            options.get(key) is not None for key in _EXTENSION_OPTIONS
        )
        case = EvalCase(
            case_id=case_id,
            query=query,
            line=self.line_no,
            cues=tuple(cues),
            expected_sources=tuple(sources),
            expected_concepts=tuple(concepts),
            options=CaseOptions(limit=limit),
        )
        if not interpret:
            # Carry-through (§1.4): Step F skipped, typed extension fields left empty.
            return case, carries

        # Step F — interpret-mode typing of the extension fields, in order.
        labels = (
            self._typed(in_case, obj.get("expected_labels"), "expected_labels", js.read_str_array)
            or []
        )
        for index, text in enumerate(labels):
            if not trim(text):
                raise self.fail(
                    f"{in_case}: expected_labels: entries must not be empty",
                    f"expected_labels[{index}]",
                )
        associations = (
            self._typed(
                in_case, obj.get("expected_associations"), "expected_associations", _associations
            )
            or []
        )
        for index, association in enumerate(associations):
            if not all(
                trim(part) for part in (association.subject, association.label, association.object)
            ):
                raise self.fail(
                    f"{in_case}: expected_associations: subject/label/object must not be empty",
                    f"expected_associations[{index}]",
                )
        citations = (
            self._typed(in_case, obj.get("expected_citations"), "expected_citations", _citations)
            or []
        )
        for index, citation in enumerate(citations):
            if not trim(citation.source):
                raise self.fail(
                    f"{in_case}: expected_citations: source must not be empty",
                    f"expected_citations[{index}].source",
                )
            if citation.quote is not None and not trim(citation.quote):
                raise self.fail(
                    f"{in_case}: expected_citations: quote must not be empty",
                    f"expected_citations[{index}].quote",
                )
        floor = self._typed(in_case, options.get("floor"), "options.floor", js.read_f32)
        if floor is not None and not 0.0 <= floor <= 1.0:
            raise self.fail(
                f"{in_case}: options.floor must be 0.0..=1.0, got {display_f32(floor)}",
                "options.floor",
            )
        tags = self._typed(in_case, options.get("tags"), "options.tags", js.read_str_array) or []
        since = self._typed(in_case, options.get("since"), "options.since", js.read_u64)
        until = self._typed(in_case, options.get("until"), "options.until", js.read_u64)
        typed = replace(
            case,
            expected_labels=tuple(labels),
            expected_associations=tuple(associations),
            expected_citations=tuple(citations),
            options=CaseOptions(
                limit=limit, floor=floor, tags=tuple(tags), since=since, until=until
            ),
        )
        return typed, carries

    def _typed(
        self,
        in_case: str,
        value: object,
        field: str,
        reader: js.Reader[T],
    ) -> T | None:
        """Step F typing of one field: null/absent -> ``None``."""
        if value is None:
            return None
        path: js.JsonPath = tuple(field.split("."))
        try:
            return reader(value, path)
        except js.JsonShapeError as exc:
            raise self.fail(f"{in_case}: {field}: {exc.relative_to(path)}", exc.field) from None


def _source(value: object, path: js.JsonPath) -> ExpectedSource:
    obj = js.read_closed_object(value, path, _SOURCE_FIELDS, required=("source",))
    source = js.read_str(obj["source"], (*path, "source"))
    paragraphs = js.read_array(obj.get("paragraphs", []), (*path, "paragraphs"), js.read_u32)
    relevance = js.read_u8(obj.get("relevance", 1), (*path, "relevance"))
    return ExpectedSource(source=source, paragraphs=tuple(paragraphs), relevance=relevance)


def _association(value: object, path: js.JsonPath) -> ExpectedAssociation:
    obj = js.read_closed_object(value, path, _ASSOCIATION_FIELDS, required=_ASSOCIATION_FIELDS)
    return ExpectedAssociation(
        subject=js.read_str(obj["subject"], (*path, "subject")),
        label=js.read_str(obj["label"], (*path, "label")),
        object=js.read_str(obj["object"], (*path, "object")),
    )


def _associations(value: object, path: js.JsonPath) -> list[ExpectedAssociation]:
    return js.read_array(value, path, _association)


def _citations(value: object, path: js.JsonPath) -> list[ExpectedCitation]:
    return js.read_array(value, path, _citation)


def _citation(value: object, path: js.JsonPath) -> ExpectedCitation:
    obj = js.read_closed_object(value, path, _CITATION_FIELDS, required=("source", "paragraph"))
    section: SectionExpectation = ABSENT
    if "section" in obj:
        section = js.read_optional(obj["section"], (*path, "section"), js.read_str)
    return ExpectedCitation(
        source=js.read_str(obj["source"], (*path, "source")),
        paragraph=js.read_u32(obj["paragraph"], (*path, "paragraph")),
        section=section,
        quote=js.read_optional(obj.get("quote"), (*path, "quote"), js.read_str),
    )


# --------------------------------------------------------------------------- expected table


def expected_frame(cases: list[EvalCase]) -> pl.DataFrame:
    """The ``expected`` table of the module docstring for ``cases``."""
    rows: dict[str, list[object]] = {name: [] for name in EXPECTED.names()}

    def add(
        case_index: int, case: EvalCase, kind: str, entry: int, item: int, **values: object
    ) -> None:
        rows["case_id"].append(case.case_id)
        rows["case_index"].append(case_index)
        rows["kind"].append(kind)
        rows["entry_index"].append(entry)
        rows["item_index"].append(item)
        for name in EXPECTED.names()[5:]:
            rows[name].append(values.get(name))

    for case_index, case in enumerate(cases):
        item = 0
        for entry, source in enumerate(case.expected_sources):
            paragraphs: list[int | None] = list(dict.fromkeys(source.paragraphs)) or [None]
            for paragraph in paragraphs:
                add(
                    case_index,
                    case,
                    "source",
                    entry,
                    item,
                    source=source.source,
                    paragraph=paragraph,
                    relevance=source.relevance,
                )
                item += 1
        for entry, text in enumerate(case.expected_concepts):
            add(case_index, case, "concept", entry, entry, text=text)
        for entry, text in enumerate(case.expected_labels):
            add(case_index, case, "label", entry, entry, text=text)
        for entry, association in enumerate(case.expected_associations):
            add(
                case_index,
                case,
                "association",
                entry,
                entry,
                subject=association.subject,
                label=association.label,
                object=association.object,
            )
        for entry, citation in enumerate(case.expected_citations):
            section = citation.section
            add(
                case_index,
                case,
                "citation",
                entry,
                entry,
                source=citation.source,
                paragraph=citation.paragraph,
                section_declared=citation.section_declared,
                section=None if isinstance(section, Absent) else section,
                quote=citation.quote,
            )
    return pl.DataFrame(rows, schema=EXPECTED)

"""eval.jsonl's strict reader: line by line, step by step, every error worded (EVALUATE.md §1).

It reads the file exactly as taguru's loader does: the first non-blank line is
the header (closed object, stamp ``taguru_eval`` must equal 1), every later
non-blank line is one case (closed object, checked in steps A–F, the first
failure wins). Every refusal is an :class:`~taguru_eval.errors.InputError`
whose message is the spec's exact text (``{label}: line {n}: …``) and whose
``path``/``line``/``field`` locate the problem.

The loader (:mod:`.dataset`) sends a file here only when its one decoding
of the file is not sure of it: this reader then words the first problem in
file order, or loads the rare well-formed file the decoding could not vouch
for. taguru's loader has a second mode (§1.4, ``taguru benchmark search``'s
carry-through) that evaluate never uses: it is not implemented.
"""

from __future__ import annotations

from typing import Final, TypeVar

import msgspec

from taguru_eval._base import jsonstrict as js
from taguru_eval._base.text import display_f32, trim
from taguru_eval.errors import InputError
from taguru_eval.inputs.evalcase import (
    ABSENT,
    CaseOptions,
    EvalCase,
    EvalSet,
    ExpectedAssociation,
    ExpectedCitation,
    ExpectedSource,
    SectionExpectation,
)
from taguru_eval.inputs.expected import expected_frame
from taguru_eval.inputs.reading import jsonl_values, read_header

EVAL_STAMP: Final = 1

T = TypeVar("T")


def load_eval_strict(text: str, label: str) -> EvalSet:
    """The strict reading of eval.jsonl text, line by line, step by step (§1.1–§1.3).

    Every error message of the loader comes from here; ``label`` prefixes each.
    """
    name: str | None = None
    header_seen = False
    cases: list[EvalCase] = []
    seen_ids: set[str] = set()
    for line_no, value in jsonl_values(text, label):
        if not header_seen:
            name = parse_header(value, label, line_no)
            header_seen = True
            continue
        loader = _CaseLoader(label, line_no)
        case = loader.load(value, seen_ids)
        seen_ids.add(case.case_id)
        cases.append(case)
    if not header_seen:
        raise InputError(f"{label}: empty file: expected a taguru_eval header line", path=label)
    if not cases:
        raise InputError(
            f"{label}: no cases: expected at least one case line after the header", path=label
        )
    return EvalSet(label=label, name=name, cases=cases, expected=expected_frame(cases))


_HEADER_FIELDS: Final = ("taguru_eval", "name", "default_target")


def parse_header(value: object, label: str, line_no: int) -> str | None:
    """The header line's ``name`` (§1.2), or the error naming the line and field."""
    return read_header(
        value,
        label,
        line_no,
        fields=_HEADER_FIELDS,
        stamp_key="taguru_eval",
        stamp=EVAL_STAMP,
        kind="eval",
    )


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

    def load(self, value: object, seen_ids: set[str]) -> EvalCase:
        """The typed case."""
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

        case = EvalCase(
            case_id=case_id,
            query=query,
            line=self.line_no,
            cues=tuple(cues),
            expected_sources=tuple(sources),
            expected_concepts=tuple(concepts),
            options=CaseOptions(limit=limit),
        )
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
        typed = msgspec.structs.replace(
            case,
            expected_labels=tuple(labels),
            expected_associations=tuple(associations),
            expected_citations=tuple(citations),
            options=CaseOptions(
                limit=limit, floor=floor, tags=tuple(tags), since=since, until=until
            ),
        )
        return typed

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

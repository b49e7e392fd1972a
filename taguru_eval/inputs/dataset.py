"""eval.jsonl: the loader of one evaluation set (EVALUATE.md §1).

:func:`load_eval` reads the file as taguru's loader does in *interpret* mode
(the mode ``evaluate`` uses) and returns an :class:`EvalSet`: the header's name,
the typed cases in file order and their ``expected`` table. Every refusal is an
:class:`~taguru_eval.errors.InputError` whose message is the spec's exact text.
:func:`validate_limits` is §1.5 (``options.limit`` within 1..=1000, worded as
ERRATA row 19 gives it), run by the caller after a successful load.

The file is parsed once. msgspec decodes each case line straight into
:class:`EvalCase` (closed objects, exact types: Step A and Step F's typing in
one step); Steps B–D are checked over the decoded ids and queries, and Steps
E–F's value rules over the ``expected`` table, which is built from the decoded
cases' lists (:mod:`.expected`). A file this decoding is not sure of — any decoding or
typing failure, a broken rule, Unicode white space around a line that JSON
itself does not skip, a value beyond a u64 — goes to the strict reader
(:mod:`.dataset_strict`), which words the first problem in file order, or loads
the rare well-formed file the decoding could not vouch for. So every message is
the strict reader's, and the decoding never has to reproduce one.

What the decoding relies on (each pinned by ``tests/inputs/test_dataset_decoding.py``):
msgspec's typed decoding rejects ``3.0``/``3e0`` for an integer, ``true`` for a
number, ``NaN``, unknown keys of a closed object, lone surrogates and invalid
UTF-8, and keeps the last value of a repeated key, as the strict reader does.
"""

from __future__ import annotations

from collections.abc import Sequence
from operator import methodcaller
from pathlib import Path
from typing import Final, NamedTuple

import msgspec

from taguru_eval._base import jsonstrict as js
from taguru_eval._base.serde_numbers import binary32_settled
from taguru_eval._base.text import WHITE_SPACE, to_f32, trim
from taguru_eval.contract import EVAL_CAP
from taguru_eval.errors import InputError
from taguru_eval.inputs.dataset_strict import load_eval_strict, parse_header
from taguru_eval.inputs.evalcase import (
    ABSENT,
    U64,
    Absent,
    CaseOptions,
    EvalCase,
    EvalSet,
    ExpectedAssociation,
    ExpectedCitation,
    ExpectedSource,
    SectionExpectation,
)
from taguru_eval.inputs.expected import (
    EXPECTED_KINDS,
    ExpectationLists,
    breaks_a_value_rule,
    expected_frame,
    expected_table,
)
from taguru_eval.inputs.reading import decode_utf8, read_bytes

__all__ = [
    "ABSENT",
    "EXPECTED_KINDS",
    "MAX_LIMIT",
    "Absent",
    "CaseOptions",
    "EvalCase",
    "EvalSet",
    "ExpectedAssociation",
    "ExpectedCitation",
    "ExpectedSource",
    "SectionExpectation",
    "expected_frame",
    "load_eval",
    "load_eval_fast",
    "load_eval_strict",
    "load_eval_text",
    "validate_limits",
]

MAX_LIMIT: Final = 1000


def load_eval(path: str | Path, label: str | None = None) -> EvalSet:
    """Load and validate ``path``; ``label`` (default: ``path`` as given) prefixes
    every message."""
    shown = str(path) if label is None else label
    raw = read_bytes(path, shown, EVAL_CAP)
    if (loaded := load_eval_fast(raw, shown)) is not None:
        return loaded
    return load_eval_strict(decode_utf8(raw, shown), shown)


def load_eval_text(text: str, label: str) -> EvalSet:
    """:func:`load_eval` on text already read (tests, stdin, in-memory data)."""
    try:
        raw = text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: the strict reader names its line
        raw = b""
    if raw and (loaded := load_eval_fast(raw, label)) is not None:
        return loaded
    return load_eval_strict(text, label)


def load_eval_fast(raw: bytes, label: str) -> EvalSet | None:
    """The one decoding of a file's bytes in interpret mode, Steps A–F included.

    ``None`` means the strict reader (:func:`load_eval_strict`) must judge the
    file: this function never words an error.
    """
    header = _first_line(raw)
    if header is None:
        return None
    header_index, header_start, header_end = header
    try:
        text = trim(raw[header_start:header_end].decode("utf-8"))
        name = parse_header(js.loads(text), label, header_index + 1)
    except (UnicodeDecodeError, js.JsonSyntaxError, InputError):
        return None
    decoded = _decode_cases(raw.split(b"\n"), header_index + 1)
    if decoded is None or not _steps_b_to_d_hold(decoded.lists.case_ids, decoded.queries):
        return None
    expected = expected_table(decoded.lists)
    if breaks_a_value_rule(expected):
        return None
    return EvalSet(label=label, name=name, cases=decoded.cases, expected=expected)


def validate_limits(eval_set: EvalSet) -> None:
    """§1.5: the first case whose ``options.limit`` is outside 1..=1000 fails.

    Worded in the loader's own shape (ERRATA row 19, taguru 0.9.7): the file as
    given, the case's physical line (blank lines count), then the field."""
    for case in eval_set.cases:
        limit = case.options.limit
        if limit is not None and not 1 <= limit <= MAX_LIMIT:
            raise InputError(
                f"{eval_set.label}: line {case.line}: case '{case.case_id}': "
                f"options.limit: must be 1..={MAX_LIMIT}, got {limit}",
                path=eval_set.label,
                line=case.line,
                field="options.limit",
            )


def _first_line(raw: bytes) -> tuple[int, int, int] | None:
    """The first non-blank line of ``raw`` split on ``\\n``: its 0-based index,
    where it starts and where it ends (its newline, or the end of ``raw``)."""
    index = start = 0
    while start <= len(raw):
        end = raw.find(b"\n", start)
        if end == -1:
            end = len(raw)
        line = raw[start:end]
        if line and not line.isspace():
            return index, start, end
        index, start = index + 1, end + 1
    return None


# --------------------------------------------------------------------------- decoding


class _Options(msgspec.Struct, frozen=True, forbid_unknown_fields=True, gc=False):
    """``options`` as written: ``null`` stands for absent on every member."""

    limit: U64 | None = None
    floor: float | None = None
    tags: tuple[str, ...] | None = None
    since: U64 | None = None
    until: U64 | None = None


_NO_OPTIONS: Final = _Options()


class _CaseLine(msgspec.Struct, frozen=True, forbid_unknown_fields=True, gc=False):
    """One case line as written, nulls included (Step A and the Step F typing in one shape)."""

    case_id: str
    query: str
    cues: tuple[str, ...] = ()
    expected_sources: tuple[ExpectedSource, ...] = ()
    expected_concepts: tuple[str, ...] = ()
    options: _Options = _NO_OPTIONS
    expected_labels: tuple[str, ...] | None = None
    expected_associations: tuple[ExpectedAssociation, ...] | None = None
    expected_citations: tuple[ExpectedCitation, ...] | None = None


_CASE_DECODER: Final = msgspec.json.Decoder(EvalCase)
_LINE_DECODER: Final = msgspec.json.Decoder(_CaseLine)
_DEFAULT_OPTIONS: Final = EvalCase("", "").options
_TRIMMED: Final = methodcaller("strip", WHITE_SPACE)


class _NotPlain(Exception):
    """A case the strict reader must judge."""


class _Decoded(NamedTuple):
    cases: list[EvalCase]
    queries: list[str]
    lists: ExpectationLists


def _decode_cases(lines: Sequence[bytes], start: int) -> _Decoded | None:
    """The cases of ``lines[start:]`` with their line numbers set, their queries
    and declared lists; ``None`` on any doubt."""
    decode = _CASE_DECODER.decode
    set_line = msgspec.structs.force_setattr
    decoded = _Decoded([], [], ExpectationLists([], [], [], [], [], []))
    add_case, add_query, lists = decoded.cases.append, decoded.queries.append, decoded.lists
    add_id, add_sources, add_concepts = (
        lists.case_ids.append,
        lists.sources.append,
        lists.concepts.append,
    )
    add_labels, add_associations, add_citations = (
        lists.labels.append,
        lists.associations.append,
        lists.citations.append,
    )
    try:
        for index in range(start, len(lines)):
            line = lines[index]
            if not line or line.isspace():
                continue
            try:
                case = decode(line)
            except msgspec.ValidationError:
                # An explicit null where a loaded case has a default: the rare line
                # decoded again, in the shape that admits it.
                case = _case(_LINE_DECODER.decode(line))
            else:
                if case.options is not _DEFAULT_OPTIONS:
                    _finish_options(case.options)
            set_line(case, "line", index + 1)
            add_case(case)
            # Gathered while the case is fresh in the cache: a later walk over every
            # case would miss it once per field.
            add_query(case.query)
            add_id(case.case_id)
            add_sources(case.expected_sources)
            add_concepts(case.expected_concepts)
            add_labels(case.expected_labels)
            add_associations(case.expected_associations)
            add_citations(case.expected_citations)
    except (msgspec.DecodeError, msgspec.ValidationError, _NotPlain):
        return None
    return decoded


def _steps_b_to_d_hold(case_ids: list[str], queries: list[str]) -> bool:
    """At least one case; no id or query trims to empty; no id repeats."""
    return (
        bool(case_ids)
        and len(set(case_ids)) == len(case_ids)
        and not _any_blank(case_ids)
        and not _any_blank(queries)
    )


def _any_blank(texts: list[str]) -> bool:
    """Whether some text trims to empty (Rust's ``str::trim``)."""
    # str.isspace holds for every White_Space character (and a few others), so only
    # the texts it accepts need the exact, slower test.
    return not all(texts) or not all(map(_TRIMMED, filter(str.isspace, texts)))


def _case(case: _CaseLine) -> EvalCase:
    """The loaded case of a line with nulls; ``null`` extension lists read as absent (Step F)."""
    options = case.options
    return EvalCase(
        case.case_id,
        case.query,
        0,
        case.cues,
        case.expected_sources,
        case.expected_concepts,
        case.expected_labels or (),
        case.expected_associations or (),
        case.expected_citations or (),
        _DEFAULT_OPTIONS if options is _NO_OPTIONS else _options(options),
    )


def _options(options: _Options) -> CaseOptions:
    loaded = CaseOptions(
        limit=options.limit,
        floor=options.floor,
        tags=options.tags or (),
        since=options.since,
        until=options.until,
    )
    _finish_options(loaded)
    return loaded


def _finish_options(options: CaseOptions) -> None:
    """Step F of decoded ``options``: u64 ceilings, ``floor`` as binary32 within 0..=1."""
    for value in (options.limit, options.since, options.until):
        if value is not None and value > js.U64_MAX:
            raise _NotPlain
    if options.floor is not None:
        floor = to_f32(options.floor)
        # A floor whose binary32 depends on how its digits are read (taguru reads
        # them with two roundings) is read from its text, by the strict reader.
        if not 0.0 <= floor <= 1.0 or not binary32_settled(options.floor):
            raise _NotPlain
        msgspec.structs.force_setattr(options, "floor", floor)

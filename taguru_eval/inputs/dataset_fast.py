"""The eval.jsonl fast path: msgspec decodes well-formed case lines straight into loaded cases.

:func:`decode_cases` answers only when it is sure. It returns the cases
exactly as the strict loader (:mod:`.dataset`) builds them, or ``None``
whenever a case line is anything but plainly well-formed: a decoding or typing
failure of any kind, Unicode white space that JSON itself does not skip, a
value outside a u64, or any rule of Steps B–F (EVALUATE.md §1.3) that fails.
``None`` sends the whole file through the strict loader, which then reports
the first problem in its own exact words — so the fast path never has to
reproduce a message.

Each line is decoded into :class:`~.evalcase.EvalCase` itself; a line that
does not fit it (an explicit ``null`` where the strict path reads "absent")
is decoded again into :class:`_CaseLine`, the null-tolerant shape, and
converted. Meanwhile Arrow reads the ``expected`` table from the same bytes on
a second thread (:mod:`.expected_arrow`); whenever its reading is not plainly
the cases', the table is built from the decoded cases instead.

What it relies on (each pinned by ``tests/inputs/test_dataset_fast.py``): msgspec's
typed decoding rejects ``3.0``/``3e0`` for an integer, ``true`` for a number,
``NaN``, unknown keys of a closed object, lone surrogates and invalid UTF-8,
and keeps the last value of a repeated key, as the strict reader does.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import cache, partial
from itertools import chain
from operator import attrgetter
from typing import Final

import msgspec
import polars as pl

from taguru_eval._base import collector
from taguru_eval._base.jsonstrict import U64_MAX
from taguru_eval._base.text import to_f32
from taguru_eval.inputs.evalcase import (
    ABSENT,
    U64,
    CaseOptions,
    EvalCase,
    ExpectedAssociation,
    ExpectedCitation,
    ExpectedSource,
    breaks_a_value_rule,
    expected_frame,
    trims_to_empty,
)
from taguru_eval.inputs.expected_arrow import start_reading


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
_HEADS: Final = {"case_id": pl.String, "query": pl.String}
_NOT_AN_OBJECT: Final = re.compile(rb"\n[^{]")
"""A line (after the first) that does not start with ``{``: blank, indented or no object."""


class _NotPlain(Exception):
    """A case the strict loader must judge."""


def decode_cases(raw: bytes, start: int, offset: int) -> tuple[list[EvalCase], pl.DataFrame] | None:
    """The cases of ``raw``'s lines from line ``start + 1`` on (0-based index
    ``start``), which begins at byte ``offset``, and their ``expected`` table.

    ``None`` when the strict loader must read the file (see the module
    docstring), including when there is no case line at all.
    """
    lines: list[bytes] | None = None
    if _NOT_AN_OBJECT.search(raw, offset - 1) is not None:
        # The common file has no such line (one scan in C); else each line is looked at.
        lines = raw.split(b"\n")
        if not _lines_open_objects(lines, start):
            return None
    # Nothing loaded is cyclic, and every tuple decoded is a tracked container: the
    # collector would rescan them over and over during a large load (both threads).
    with collector.paused():
        # Arrow first, so that its thread reads while this one splits and decodes.
        arrow = start_reading(memoryview(raw)[offset:])
        try:
            checked = _decode_and_check(raw.split(b"\n") if lines is None else lines, start)
            if checked is None:
                return None
            case_ids, cases = checked
            section_declared = cache(partial(_section_declared, raw, offset, cases))
            if not arrow.done():
                section_declared()  # this thread would only wait: walk the citations meanwhile
        finally:
            # Waits for Arrow's thread whatever happened (the loader never leaves it running).
            arrow.result()
        read = arrow.expected(case_ids, section_declared)
        if read is None:
            expected = expected_frame(cases)
            broken = breaks_a_value_rule(expected)
        else:
            expected, broken = read.table, read.breaks_a_rule
        return None if broken else (cases, expected)


def _decode_and_check(
    lines: Sequence[bytes], start: int
) -> tuple[pl.Series, list[EvalCase]] | None:
    """The main thread's share, done while Arrow still reads: the cases, and
    Steps B–D over their ids and queries."""
    decoded = _decode(lines, start)
    if decoded is None:
        return None
    cases, case_ids, queries = decoded
    if not cases or len(set(case_ids)) != len(cases):
        return None
    heads = pl.DataFrame({"case_id": case_ids, "query": queries}, schema=_HEADS)
    if heads.select((trims_to_empty("case_id") | trims_to_empty("query")).any()).item():
        return None
    return heads["case_id"], cases


def _lines_open_objects(lines: Sequence[bytes], start: int) -> bool:
    """Whether every non-blank case line begins (after JSON white space) with ``{``.

    A line that does not cannot be a case, so the strict loader answers for the
    file; and Arrow's JSON reader must never see one: a ``null`` where its
    reading begins kills the process (a segmentation fault, seen with pyarrow 26).
    """
    return all(line.lstrip(b" \t\r")[:1] in (b"{", b"") for line in lines[start:])


def _decode(
    lines: Sequence[bytes], start: int
) -> tuple[list[EvalCase], list[str], list[str]] | None:
    """The cases with their lines set, their ids and queries; ``None`` on any doubt."""
    decode = _CASE_DECODER.decode
    set_line = msgspec.structs.force_setattr
    cases: list[EvalCase] = []
    case_ids: list[str] = []
    queries: list[str] = []
    try:
        for index in range(start, len(lines)):
            line = lines[index]
            if not line or line.isspace():
                continue
            try:
                case = decode(line)
            except msgspec.ValidationError:
                case = _case(_LINE_DECODER.decode(line))
            else:
                if case.options is not _DEFAULT_OPTIONS:
                    _finish_options(case.options)
            set_line(case, "line", index + 1)
            cases.append(case)
            case_ids.append(case.case_id)
            queries.append(case.query)
    except (msgspec.DecodeError, msgspec.ValidationError, _NotPlain):
        return None
    return cases, case_ids, queries


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
        if value is not None and value > U64_MAX:
            raise _NotPlain
    if options.floor is not None:
        floor = to_f32(options.floor)
        if not 0.0 <= floor <= 1.0:
            raise _NotPlain
        msgspec.structs.force_setattr(options, "floor", floor)


def _section_declared(raw: bytes, offset: int, cases: Sequence[EvalCase]) -> list[bool] | None:
    """Whether each expected citation, in file order, declares ``section``
    (``None`` when the case lines hold no ``null``: a null section is then an absent one)."""
    if raw.find(b"null", offset) == -1:
        return None
    citations = chain.from_iterable(map(attrgetter("expected_citations"), cases))
    return [citation.section is not ABSENT for citation in citations]

"""The eval.jsonl fast path: msgspec decodes well-formed case lines straight into loaded cases.

:func:`decode_cases` answers only when it is sure. It returns the cases
exactly as the strict loader (:mod:`.dataset`) builds them, or ``None``
whenever a case line is anything but plainly well-formed: a decoding or typing
failure of any kind, Unicode white space that JSON itself does not skip, an
explicit ``null`` where the strict path reads "absent", a value outside a u64,
or any rule of Steps B–F (EVALUATE.md §1.3) that fails. ``None`` sends the
whole file through the strict loader, which then reports the first problem in
its own exact words — so the fast path never has to reproduce a message.

What it relies on (each pinned by ``tests/inputs/test_dataset_fast.py``): msgspec's
typed decoding rejects ``3.0``/``3e0`` for an integer, ``true`` for a number,
``NaN``, unknown keys of a closed object, lone surrogates and invalid UTF-8,
and keeps the last value of a repeated key, as the strict reader does.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Annotated, Final

import msgspec
import polars as pl

from taguru_eval._base.jsonstrict import U64_MAX
from taguru_eval._base.text import WHITE_SPACE, to_f32
from taguru_eval.inputs.evalcase import (
    CaseOptions,
    EvalCase,
    ExpectedAssociation,
    ExpectedCitation,
    ExpectedSource,
    expected_frame,
)

U64 = Annotated[int, msgspec.Meta(ge=0)]
"""Non-negative; msgspec cannot bound above i64, so the u64 ceiling is checked after decoding."""


class _Options(msgspec.Struct, frozen=True, forbid_unknown_fields=True, gc=False):
    """``options`` as written: ``null`` stands for absent on every member."""

    limit: U64 | None = None
    floor: float | None = None
    tags: tuple[str, ...] | None = None
    since: U64 | None = None
    until: U64 | None = None


_NO_OPTIONS: Final = _Options()


class _CaseLine(msgspec.Struct, frozen=True, forbid_unknown_fields=True, gc=False):
    """One case line as written (Step A and the Step F typing in one closed shape)."""

    case_id: str
    query: str
    cues: tuple[str, ...] = ()
    expected_sources: tuple[ExpectedSource, ...] = ()
    expected_concepts: tuple[str, ...] = ()
    options: _Options = _NO_OPTIONS
    expected_labels: tuple[str, ...] | None = None
    expected_associations: tuple[ExpectedAssociation, ...] | None = None
    expected_citations: tuple[ExpectedCitation, ...] | None = None


_DECODER: Final = msgspec.json.Decoder(_CaseLine)
_DEFAULT_OPTIONS: Final = CaseOptions()
_HEADS: Final = {"case_id": pl.String, "query": pl.String}


class _NotPlain(Exception):
    """A case the strict loader must judge."""


def decode_cases(lines: Sequence[bytes], start: int) -> tuple[list[EvalCase], pl.DataFrame] | None:
    """The cases of ``lines[start:]`` and their ``expected`` table (``lines`` split on
    ``\\n``; line n is ``lines[n - 1]``).

    ``None`` when the strict loader must read the file (see the module
    docstring), including when there is no case line at all.
    """
    decode = _DECODER.decode
    cases: list[EvalCase] = []
    try:
        with _gc_paused():
            for index in range(start, len(lines)):
                line = lines[index]
                if line and not line.isspace():
                    cases.append(_case(decode(line), index + 1))
    except (msgspec.DecodeError, msgspec.ValidationError, _NotPlain):
        return None
    case_ids = [case.case_id for case in cases]
    if not cases or len(set(case_ids)) != len(cases):
        return None
    # Steps B and C over the whole file at once.
    heads = pl.DataFrame(
        {"case_id": case_ids, "query": [case.query for case in cases]}, schema=_HEADS
    )
    if heads.select((_blank("case_id") | _blank("query")).any()).item():
        return None
    expected = expected_frame(cases)
    return None if _breaks_a_rule(expected) else (cases, expected)


@contextmanager
def _gc_paused() -> Iterator[None]:
    """Hold the cyclic collector off while acyclic objects are made by the hundred thousand.

    Every tuple decoded is a tracked container, so collections would run over
    and over during a large load without ever finding a cycle.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _case(case: _CaseLine, line_no: int) -> EvalCase:
    """The loaded case; ``null`` extension lists read as absent (Step F)."""
    options = case.options
    return EvalCase(
        case.case_id,
        case.query,
        line_no,
        case.cues,
        case.expected_sources,
        case.expected_concepts,
        case.expected_labels or (),
        case.expected_associations or (),
        case.expected_citations or (),
        _DEFAULT_OPTIONS if options is _NO_OPTIONS else _options(options),
    )


def _options(options: _Options) -> CaseOptions:
    """Step F of ``options``: u64 ceilings, ``floor`` as binary32 within 0..=1."""
    for value in (options.limit, options.since, options.until):
        if value is not None and value > U64_MAX:
            raise _NotPlain
    floor = None if options.floor is None else to_f32(options.floor)
    if floor is not None and not 0.0 <= floor <= 1.0:
        raise _NotPlain
    return CaseOptions(
        limit=options.limit,
        floor=floor,
        tags=options.tags or (),
        since=options.since,
        until=options.until,
    )


def _blank(column: str) -> pl.Expr:
    """Trims to empty under Rust's ``str::trim`` (null stays null)."""
    return pl.col(column).str.strip_chars(WHITE_SPACE) == ""


def _breaks_a_rule(expected: pl.DataFrame) -> bool:
    """Steps B–F's value rules over the expected table (Step D is the caller's).

    Step E: a source trims to empty, relevance above 3; Step F: an
    expected_labels entry, an association part, a citation source or a
    present quote trims to empty. Concepts and tags have no such rule.
    """
    broken = (
        (pl.col("relevance") > 3)
        | _blank("source")
        | (_blank("text") & (pl.col("kind") == "label"))
        | _blank("subject")
        | _blank("label")
        | _blank("object")
        | _blank("quote")
    )
    return bool(expected.select(broken.any()).item())

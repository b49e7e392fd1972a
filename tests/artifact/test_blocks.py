"""The case block's lane blocks follow the shapes' declarations key for key.

The canonicalisers spell most of their keys out (a loop would cost, writing
hundreds of thousands of hits), so nothing derives their order from
:mod:`taguru_eval.tables.shapes`: these tests hold the two equal. Every
outcome of every block is rendered from an input holding every declared
member; what comes out must be declared, in declaration order, binary32
values as :class:`F32`, and every declared member must come out under some
outcome.
"""

from __future__ import annotations

import itertools
import types
from collections.abc import Callable, Mapping
from typing import (
    Annotated,
    Any,
    NotRequired,
    Required,
    Union,
    get_args,
    get_origin,
    get_type_hints,
    is_typeddict,
)

import pytest

from taguru_eval._base.text import F32
from taguru_eval.artifact.blocks import (
    budget_block,
    citation_check_block,
    evidence_block,
    passage_block,
    structural_block,
)
from taguru_eval.artifact.layout import CASE_LAYOUT, FromLane
from taguru_eval.tables.derive import keys
from taguru_eval.tables.shapes import (
    AssociationQuery,
    Binary32,
    BudgetUsage,
    CaseBlock,
    CitationCheck,
    CitationsChecks,
    EvidenceOutcome,
    PassageOutcome,
    PositionOutcome,
    SectionCheck,
    Structural,
)

Fixed = Mapping[type, Mapping[str, object]]
"""Shape -> members given a set value (an outcome) instead of a sample."""

Variant = tuple[Callable[[Mapping[str, Any]], dict[str, Any]], type, Fixed]

VARIANTS: list[Variant] = [
    *[
        (passage_block, PassageOutcome, {PassageOutcome: {"outcome": o}})
        for o in ("searched", "failed")
    ],
    *[
        (
            structural_block,
            Structural,
            {PositionOutcome: {"outcome": position}, AssociationQuery: {"outcome": query}},
        )
        for position, query in itertools.product(
            ("not_found", "resolved", "ambiguous", "errored"), ("queried", "errored")
        )
    ],
    *[
        (
            citation_check_block,
            CitationCheck,
            {CitationCheck: {"outcome": "resolved"}, SectionCheck: {"check": check}},
        )
        for check in ("not_checked", "matched", "mismatched")
    ],
    (citation_check_block, CitationCheck, {CitationCheck: {"outcome": "unresolved"}}),
    *[
        (evidence_block, EvidenceOutcome, {EvidenceOutcome: {"outcome": o}})
        for o in ("assembled", "failed")
    ],
    (budget_block, BudgetUsage, {}),
]


def _unwrapped(hint: Any) -> Any:
    """``hint`` without ``NotRequired`` or ``| None`` (``Annotated`` kept: it says binary32)."""
    while get_origin(hint) in (NotRequired, Required, Union, types.UnionType):
        hint = next(arg for arg in get_args(hint) if arg is not type(None))
    return hint


def _is_shape(hint: Any) -> bool:
    return isinstance(hint, type) and is_typeddict(hint)


def _hints(shape: type) -> dict[str, Any]:
    return get_type_hints(shape, include_extras=True)


def _sample(hint: Any, fixed: Fixed) -> Any:
    """A value of ``hint`` holding every declared member, none null."""
    hint = _unwrapped(hint)
    if get_origin(hint) is Annotated:
        return _sample(get_args(hint)[0], fixed)
    if get_origin(hint) is list:
        return [_sample(get_args(hint)[0], fixed)]
    if get_origin(hint) is dict:
        return {"budget_exceeded": 2}
    if _is_shape(hint):
        given = fixed.get(hint, {})
        return {
            name: given[name] if name in given else _sample(member, fixed)
            for name, member in _hints(hint).items()
        }
    return {str: "s", int: 1, float: 0.5, bool: True}[hint]


def _declared(shape: type) -> set[tuple[type, str]]:
    """Every (shape, key) reachable from ``shape``."""
    found: set[tuple[type, str]] = set()
    seen, pending = {shape}, [shape]
    while pending:
        current = pending.pop()
        for name, member in _hints(current).items():
            found.add((current, name))
            inner = _unwrapped(member)
            while get_origin(inner) in (list, Annotated):
                inner = _unwrapped(get_args(inner)[0])
            if _is_shape(inner) and inner not in seen:
                seen.add(inner)
                pending.append(inner)
    return found


def _check(value: Any, hint: Any, where: str, written: set[tuple[type, str]]) -> None:
    """``value`` as ``hint`` declares it: keys declared and in order, binary32 as F32."""
    hint = _unwrapped(hint)
    if hint == Binary32:
        assert isinstance(value, F32), f"{where}: a binary32 value written as {value!r}"
        return
    if get_origin(hint) is Annotated:
        hint = get_args(hint)[0]
    if get_origin(hint) is list:
        assert isinstance(value, list)
        for index, item in enumerate(value):
            _check(item, get_args(hint)[0], f"{where}[{index}]", written)
    elif _is_shape(hint):
        assert isinstance(value, dict), where
        declared = keys(hint)
        assert set(value) <= set(declared), f"{where}: {sorted(set(value) - set(declared))}"
        assert list(value) == [key for key in declared if key in value], where
        members = _hints(hint)
        for key, item in value.items():
            written.add((hint, key))
            if item is not None:
                _check(item, members[key], f"{where}.{key}", written)


@pytest.mark.parametrize(
    "root", sorted({shape for _, shape, _ in VARIANTS}, key=lambda shape: shape.__name__)
)
def test_every_lane_block_writes_its_declared_keys_in_declaration_order(root: type) -> None:
    written: set[tuple[type, str]] = set()
    for render, shape, fixed in VARIANTS:
        if shape is root:
            _check(render(_sample(shape, fixed)), shape, shape.__name__, written)
    # Under some outcome every declared member is written: none is dropped.
    assert _declared(root) - written == set()


def test_the_sample_holds_what_a_canonicaliser_must_drop() -> None:
    # The check above is only as good as its input: a failed passage's sample
    # carries hits and a plan, which the block must leave out.
    failed = _sample(PassageOutcome, {PassageOutcome: {"outcome": "failed"}})
    assert {"plan", "hits", "message"} <= set(failed)
    assert list(passage_block(failed)) == ["outcome", "message", "latency_ms"]


def test_the_case_block_s_lane_values_are_its_declared_members_in_order() -> None:
    written = [slot.path for slot in CASE_LAYOUT if isinstance(slot, FromLane)]
    assert [path[0] for path in written] == list(keys(CaseBlock))
    assert ("citations", *keys(CitationsChecks)) in written

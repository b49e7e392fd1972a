"""Hypothesis strategies for well-formed eval.jsonl files (every optional key
present, null or left out), shared by the loader's decoding and expected-table tests."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import strategies as st

from taguru_eval._base.text import WHITE_SPACE

HEADER = '{"taguru_eval": 1, "name": "fast"}'
U32_MAX = 2**32 - 1
U64_MAX = 2**64 - 1

names = st.text(alphabet=st.characters(codec="utf-8"), min_size=1, max_size=8).filter(
    lambda text: text.strip(WHITE_SPACE) != ""
)
any_text = st.text(alphabet=st.characters(codec="utf-8"), max_size=6)
u32 = st.one_of(st.integers(0, 50), st.sampled_from([0, U32_MAX]))
u64 = st.one_of(st.integers(0, 10**6), st.sampled_from([0, 2**63, U64_MAX]))
floors = st.one_of(
    st.floats(0.0, 1.0),
    st.sampled_from([0, 1, -0.0, 1.00000001, 5e-324, 1e-46, 0.1]),
)


def optional(strategy: st.SearchStrategy[Any], *, null: bool = True) -> st.SearchStrategy[Any]:
    """A value, ``None`` (written as null), or ``ABSENT_KEY`` (key left out)."""
    choices = [strategy, st.just(ABSENT_KEY)]
    if null:
        choices.append(st.none())
    return st.one_of(*choices)


ABSENT_KEY = object()


def members(**fields: Any) -> dict[str, Any]:
    return {key: value for key, value in fields.items() if value is not ABSENT_KEY}


@st.composite
def sources(draw: st.DrawFn) -> dict[str, Any]:
    return members(
        source=draw(names),
        paragraphs=draw(optional(st.lists(u32, max_size=4), null=False)),
        relevance=draw(optional(st.integers(0, 3), null=False)),
    )


@st.composite
def citations(draw: st.DrawFn) -> dict[str, Any]:
    return members(
        source=draw(names),
        paragraph=draw(u32),
        section=draw(optional(any_text)),
        quote=draw(optional(names)),
    )


associations = st.fixed_dictionaries({"subject": names, "label": names, "object": names})


@st.composite
def valid_cases(draw: st.DrawFn) -> dict[str, Any]:
    options = members(
        limit=draw(optional(u64)),
        floor=draw(optional(floors)),
        tags=draw(optional(st.lists(any_text, max_size=2))),
        since=draw(optional(u64)),
        until=draw(optional(u64)),
    )
    return members(
        case_id=draw(names),
        query=draw(names),
        cues=draw(optional(st.lists(any_text, max_size=3), null=False)),
        expected_sources=draw(optional(st.lists(sources(), max_size=3), null=False)),
        expected_concepts=draw(optional(st.lists(any_text, max_size=2), null=False)),
        expected_labels=draw(optional(st.lists(names, max_size=2))),
        expected_associations=draw(optional(st.lists(associations, max_size=2))),
        expected_citations=draw(optional(st.lists(citations(), max_size=3))),
        options=draw(st.one_of(st.just(ABSENT_KEY), st.just(options))),
    )


def unique_ids(cases: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{**case, "case_id": f"{case['case_id']}#{index}"} for index, case in enumerate(cases)]


@st.composite
def valid_files(draw: st.DrawFn) -> bytes:
    cases = unique_ids(draw(st.lists(valid_cases(), min_size=1, max_size=5)))
    lines = [HEADER, *(json.dumps(case, ensure_ascii=draw(st.booleans())) for case in cases)]
    if draw(st.booleans()):
        lines.insert(draw(st.integers(1, len(lines))), draw(st.sampled_from(["", " ", "\t\r"])))
    newline = draw(st.sampled_from(["\n", "\r\n"]))
    return (newline.join(lines) + draw(st.sampled_from(["", newline]))).encode("utf-8")

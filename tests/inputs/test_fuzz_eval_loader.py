"""Property: whatever bytes an eval.jsonl holds, the loader accepts them or raises
InputError — never another exception (so no traceback ever reaches the user) —
and the error is one printable line, whatever control characters, lone
surrogates or huge integers the file holds.

``TAGURU_EVAL_FUZZ_EXAMPLES`` raises the example count
(``benchmarks/fuzz_long.py`` runs these properties far longer than CI does).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.fuzz import EXAMPLES, assert_one_printable_line, nasty_text

from taguru_eval.errors import InputError
from taguru_eval.inputs.dataset import EvalSet, load_eval, validate_limits
from taguru_eval.tables import EXPECTED

HEADER: dict[str, Any] = {"taguru_eval": 1, "name": "fuzz", "default_target": {"a": [1]}}
CASES: list[dict[str, Any]] = [
    {
        "case_id": "brand-origin-001",
        "query": "青嶺はどこの蔵の酒か",
        "cues": ["青嶺"],
        "expected_sources": [{"source": "corpus/brewery.md", "paragraphs": [0, 2], "relevance": 3}],
        "expected_concepts": ["青嶺酒造"],
        "options": {"limit": 10, "floor": 0.25, "tags": ["brand"], "since": 1, "until": 2},
    },
    {
        "case_id": "c2",
        "query": "q",
        "expected_labels": ["好き"],
        "expected_associations": [{"subject": "青嶺", "label": "好き", "object": "日本酒"}],
        "expected_citations": [
            {"source": "a.md", "paragraph": 3, "section": None, "quote": "x"},
            {"source": "a.md", "paragraph": 4, "section": "沿革"},
        ],
    },
]

ODD_LITERALS = [
    b"NaN", b"Infinity", b"-Infinity", b"1e999", b"\xff", b"\xc3", b'"\\ud800"',
    b"\xef\xbb\xbf", b"\x00",
]  # fmt: skip

DEEP = 3000
EXTRA_LINES = [
    "",
    "  ",
    "\t",
    "#",
    '{"case_id":"deep","query":"q","cues":' + "[" * DEEP + "]" * DEEP + "}",
    '{"case_id":"deep","query":"q","default_target":' + '{"a":' * DEEP + "1" + "}" * DEEP + "}",
]

# A JSON string standing for an integer too long for Python's int() (and any double).
HUGE_MARKER = "__huge_integer__"
HUGE_DIGITS = "9" * 5000
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=8),
    nasty_text,
    st.sampled_from(
        [10**400, -(10**30), 2**64, 2**32, 256, -1, 0, 3.0, 1e308, "", " ", HUGE_MARKER]
    ),
)
json_values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(nasty_text, inner, max_size=3)
    ),
    max_leaves=8,
)


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(value, dict):
        for key, item in value.items():
            out += _paths(item, (*prefix, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            out += _paths(item, (*prefix, index))
    return out


def _replace(doc: Any, path: tuple[Any, ...], new: Any) -> Any:
    if not path:
        return new
    head, rest = path[0], path[1:]
    if isinstance(doc, dict):
        return {**doc, head: _replace(doc[head], rest, new)}
    copy = list(doc)
    copy[head] = _replace(copy[head], rest, new)
    return copy


@st.composite
def mutated_file(draw: st.DrawFn) -> bytes:
    docs: list[Any] = [HEADER, *draw(st.lists(st.sampled_from(CASES), min_size=0, max_size=3))]
    for _ in range(draw(st.integers(0, 3))):
        index = draw(st.integers(0, len(docs) - 1))
        path = draw(st.sampled_from(_paths(docs[index])))
        kind = draw(st.sampled_from(["flip", "unknown_key", "nest", "huge", "nasty"]))
        if kind == "flip":
            docs[index] = _replace(docs[index], path, draw(json_values))
        elif kind == "unknown_key":
            target: Any = docs[index]
            for part in path:
                target = target[part]
            if isinstance(target, dict):
                key = draw(
                    st.one_of(
                        st.sampled_from(["sources", "bogus", "limit", "section", "target"]),
                        nasty_text,
                    )
                )
                docs[index] = _replace(docs[index], path, {**target, key: draw(json_values)})
        elif kind == "nest":
            # Kept well below Python's recursion limit so generation itself is
            # deterministic; deeper nesting is inserted as raw text below.
            depth = draw(st.sampled_from([5, 126, 127, 128, 129]))
            nested: Any = 1
            for _level in range(depth):
                nested = [nested]
            docs[index] = _replace(docs[index], path, nested)
        elif kind == "nasty":
            # A string with control characters or a lone surrogate (a case_id, a key's value…)
            docs[index] = _replace(docs[index], path, draw(nasty_text))
        else:
            docs[index] = _replace(
                docs[index], path, draw(st.sampled_from([10**400, 2**64, 1e308, HUGE_MARKER]))
            )
    ascii_only = draw(st.booleans())
    lines = [
        json.dumps(doc, ensure_ascii=ascii_only).replace(f'"{HUGE_MARKER}"', HUGE_DIGITS)
        for doc in docs
    ]
    if draw(st.booleans()):
        lines.insert(draw(st.integers(0, len(lines))), draw(st.sampled_from(EXTRA_LINES)))
    # A lone surrogate is written as a \\ud800 escape (ascii_only) or as the bytes a
    # careless encoder would emit (invalid UTF-8): both must be refused on one line.
    joined = ("\r\n" if draw(st.booleans()) else "\n").join(lines)
    data = joined.encode("utf-8", "surrogatepass")
    for _ in range(draw(st.integers(0, 2))):
        byte_kind = draw(st.sampled_from(["truncate", "insert", "delete", "literal"]))
        position = draw(st.integers(0, len(data)))
        if byte_kind == "truncate":
            data = data[:position]
        elif byte_kind == "insert":
            data = data[:position] + draw(st.binary(min_size=1, max_size=4)) + data[position:]
        elif byte_kind == "delete":
            data = data[:position] + data[position + 1 :]
        else:
            literal = draw(st.sampled_from(ODD_LITERALS))
            data = data[:position] + literal + data[position:]
    return data


@pytest.fixture(scope="module")
def target(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("fuzz") / "eval.jsonl"


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=mutated_file())
def test_loader_accepts_or_raises_input_error(target: Path, data: bytes) -> None:
    target.write_bytes(data)
    try:
        eval_set = load_eval(target, "eval.jsonl")
        validate_limits(eval_set)
    except InputError as error:
        assert error.exit_code == 2
        assert_one_printable_line(str(error))
        assert "set_int_max_str_digits" not in str(error)
        return
    assert eval_set.cases
    assert_expected_mirrors_the_cases(eval_set)


def assert_expected_mirrors_the_cases(eval_set: EvalSet) -> None:
    """The ``expected`` table holds exactly the items the loaded cases declare."""
    expected = eval_set.expected
    assert expected.schema == EXPECTED
    counts = dict(expected.group_by("kind").len().iter_rows())
    cases = eval_set.cases
    source_rows = sum(
        max(1, len(set(entry.paragraphs))) for case in cases for entry in case.expected_sources
    )
    assert counts.get("source", 0) == source_rows
    assert counts.get("concept", 0) == sum(len(case.expected_concepts) for case in cases)
    assert counts.get("label", 0) == sum(len(case.expected_labels) for case in cases)
    assert counts.get("association", 0) == sum(len(c.expected_associations) for c in cases)
    assert counts.get("citation", 0) == sum(len(case.expected_citations) for case in cases)
    ids = expected.select("case_index", "case_id").unique().sort("case_index").rows()
    assert all(cases[index].case_id == case_id for index, case_id in ids)


def test_unmutated_file_loads(target: Path) -> None:
    target.write_text("\n".join(json.dumps(d) for d in [HEADER, *CASES]), encoding="utf-8")
    eval_set = load_eval(target)
    assert len(eval_set.cases) == 2

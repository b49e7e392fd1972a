"""The loader's one decoding: it answers exactly as the strict reader, or leaves the file to it.

For any bytes, ``load_eval_fast`` (msgspec's decoding, Steps A–F checked over
the decoded cases) either returns ``None`` (the strict reader judges the file)
or an EvalSet equal to the strict reader's — same name, cases, ``expected``
frame and warnings. On plainly well-formed files it must answer. The columnar
``expected`` builder is checked against the old row builder.
"""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support import serde_json_oracle as oracle
from support.eval_files import HEADER, unique_ids, valid_cases, valid_files
from support.paths import PROJECT_ROOT

from taguru_eval.errors import InputError
from taguru_eval.inputs import dataset
from taguru_eval.inputs.dataset import EvalSet, load_eval, load_eval_strict, load_eval_text

BAD_VALUES: list[Any] = [
    None, True, 3.0, -1, 256, 2**32, 2**64, "x", "", " ", "\u3000", [], {}, [1.5], ["a", 1],
    1.5, -0.5, 1e39, 4,
]  # fmt: skip
RAW_LITERALS = ["NaN", "Infinity", "1e400", "3e0", '"\\ud800"', '"\\udc00\\ud800"', "-0", "01"]
KEYS = [
    "case_id", "query", "cues", "expected_sources", "expected_concepts", "expected_labels",
    "expected_associations", "expected_citations", "options", "bogus", "sources",
]  # fmt: skip
BLANKS = ["", " ", "\u3000", "\x85", "\u200b", "\x1c"]
NEAR_MISSES: dict[tuple[Any, ...], list[Any]] = {
    ("case_id",): BLANKS,
    ("query",): BLANKS,
    ("expected_sources", 0, "source"): BLANKS,
    ("expected_sources", 0, "relevance"): [4, 255, 256, 3.0, True, None],
    ("expected_sources", 0, "paragraphs"): [None, [1.0], [-1], [2**32], [True]],
    ("expected_sources", 0, "bogus"): [1],
    ("expected_citations", 0, "section"): [1, [], *BLANKS],
    ("expected_citations", 0, "quote"): [1, *BLANKS],
    ("expected_citations", 0, "paragraph"): [None, 2**32, 1.0],
    ("expected_citations", 0, "source"): BLANKS,
    ("expected_associations", 0, "label"): [None, *BLANKS],
    ("expected_labels", 0): [None, 1, *BLANKS],
    ("expected_concepts", 0): BLANKS,
    ("cues", 0): BLANKS,
    ("options", "limit"): [0, 1001, 2**64, -1, 1.0],
    ("options", "floor"): [1.5, -0.1, 1.00000001, 1.0000001, True, "0.5", 1e39],
    ("options", "tags"): [[1], "t", [" "]],
    ("options", "since"): [2**64 - 1, 2**64, -1, 0.0],
    ("options", "until"): [2**64, None],
    ("options", "sources"): [None],
}
NESTED = list(NEAR_MISSES)


TEMPLATES: dict[str, Any] = {
    "expected_sources": {"source": "s"},
    "expected_citations": {"source": "s", "paragraph": 1},
    "expected_associations": {"subject": "a", "label": "b", "object": "c"},
    "expected_labels": "l",
}


def _set(doc: Any, path: tuple[Any, ...], value: Any, template: Any = None) -> Any:
    """``doc`` with ``path`` set; a missing list entry starts from a valid one."""
    if not path:
        return value
    head, rest = path[0], path[1:]
    if isinstance(head, int):
        items = list(doc) if isinstance(doc, list) and doc else [template]
        items[0] = _set(items[0], rest, value)
        return items
    container = dict(doc) if isinstance(doc, dict) else {}
    container[head] = _set(container.get(head), rest, value, TEMPLATES.get(head))
    return container


@st.composite
def mutated_files(draw: st.DrawFn) -> bytes:
    """Mostly well-formed files with one to three problems (or traps) each."""
    docs: list[Any] = unique_ids(draw(st.lists(valid_cases(), min_size=1, max_size=3)))
    first_id = docs[0]["case_id"]
    for _ in range(draw(st.integers(1, 2))):
        index = draw(st.integers(0, len(docs) - 1))
        kind = draw(
            st.sampled_from(["value", "nested", "nested", "raw", "duplicate", "pad", "id", "line"])
        )
        if kind in ("value", "nested", "id") and not isinstance(docs[index], dict):
            continue
        text = docs[index] if isinstance(docs[index], str) else _line(docs[index])
        if kind == "value":
            docs[index] = {
                **docs[index],
                draw(st.sampled_from(KEYS)): draw(st.sampled_from(BAD_VALUES)),
            }
        elif kind == "nested":
            path = draw(st.sampled_from(NESTED))
            docs[index] = _set(docs[index], path, draw(st.sampled_from(NEAR_MISSES[path])))
        elif kind == "id":
            docs[index] = {**docs[index], "case_id": draw(st.sampled_from(["", " ", first_id]))}
        elif kind == "raw" and isinstance(docs[index], dict):
            marked = _line(_set(docs[index], draw(st.sampled_from(NESTED)), "@@RAW@@"))
            docs[index] = marked.replace('"@@RAW@@"', draw(st.sampled_from(RAW_LITERALS)))
        elif kind == "duplicate":
            key = draw(st.sampled_from(KEYS[:9]))
            first = json.dumps(draw(st.sampled_from(BAD_VALUES)))
            docs[index] = text.replace("{", f'{{"{key}": {first}, ', 1)
        elif kind == "pad":
            pad = draw(st.sampled_from(["\u3000", "\x0b", "\x85", "\ufeff", " \t", "\u200b"]))
            docs[index] = pad + text + draw(st.sampled_from(["", pad]))
        elif kind == "line":
            line = draw(st.sampled_from(["\u3000", "\x0c", "#", "{}", "[]", "1"]))
            docs.insert(index, line)
    lines = [HEADER, *(doc if isinstance(doc, str) else _line(doc) for doc in docs)]
    data = "\n".join(lines).encode("utf-8")
    if draw(st.booleans()):
        position = draw(st.integers(0, len(data)))
        odd = draw(st.sampled_from([b"\xff", b"\xc3", b"\xef\xbb\xbf"]))
        data = data[:position] + odd + data[position:]
    return data


@st.composite
def near_miss_files(draw: st.DrawFn) -> bytes:
    """A well-formed file with exactly one value one step away from a rule's edge."""
    docs: list[Any] = unique_ids(draw(st.lists(valid_cases(), min_size=1, max_size=3)))
    index = draw(st.integers(0, len(docs) - 1))
    path = draw(st.sampled_from(NESTED))
    docs[index] = _set(docs[index], path, draw(st.sampled_from(NEAR_MISSES[path])))
    if len(docs) > 1 and draw(st.integers(0, 9)) == 0:
        docs[-1] = {**docs[-1], "case_id": docs[0]["case_id"]}
    return "\n".join([HEADER, *map(_line, docs)]).encode("utf-8")


def _line(doc: Any) -> str:
    return json.dumps(doc, ensure_ascii=False)


def strict_outcome(raw: bytes) -> EvalSet | str:
    try:
        return load_eval_strict(raw.decode("utf-8"), "eval.jsonl")
    except (UnicodeDecodeError, InputError) as error:
        return str(error)


def assert_same_eval_set(fast: EvalSet, strict: EvalSet) -> None:
    assert fast.name == strict.name
    assert fast.cases == strict.cases
    assert [case.line for case in fast.cases] == [case.line for case in strict.cases]
    assert fast.expected.equals(strict.expected)
    assert fast.expected.schema == strict.expected.schema


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(raw=valid_files())
def test_well_formed_files_take_the_fast_path_and_equal_the_strict_one(raw: bytes) -> None:
    fast = dataset.load_eval_fast(raw, "eval.jsonl")
    strict = strict_outcome(raw)
    assert isinstance(strict, EvalSet), strict
    assert fast is not None
    assert_same_eval_set(fast, strict)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(raw=st.one_of(near_miss_files(), mutated_files()))
def test_fast_path_never_answers_differently_from_the_strict_one(raw: bytes) -> None:
    fast = dataset.load_eval_fast(raw, "eval.jsonl")
    strict = strict_outcome(raw)
    if fast is not None:
        assert isinstance(strict, EvalSet), strict
        assert_same_eval_set(fast, strict)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(raw=st.one_of(valid_files(), mutated_files()))
def test_public_loaders_give_the_strict_answer(tmp_path_factory: Any, raw: bytes) -> None:
    """load_eval (bytes) and load_eval_text (text) end with the same result or message."""
    path = tmp_path_factory.mktemp("fast") / "eval.jsonl"
    path.write_bytes(raw)
    strict = strict_outcome(raw)
    for load in (lambda: load_eval(path, "eval.jsonl"), lambda: _text_load(raw)):
        try:
            got: EvalSet | str | None = load()
        except InputError as error:
            got = str(error)
        if got is None:  # invalid UTF-8 has no text form
            continue
        if isinstance(strict, str):
            assert got == strict or (
                isinstance(got, str) and got.startswith("cannot read eval.jsonl: stream did not")
            )
        else:
            assert isinstance(got, EvalSet)
            assert_same_eval_set(got, strict)


def _text_load(raw: bytes) -> EvalSet | None:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return load_eval_text(text, "eval.jsonl")


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(raw=valid_files())
def test_columnar_expected_table_equals_the_row_builder(raw: bytes) -> None:
    loaded = load_eval_strict(raw.decode("utf-8"), "eval.jsonl")
    assert loaded.expected.equals(oracle.expected_rows(loaded.cases))


# --------------------------------------------------------------------------- pinned behaviours


def _one_case(line: str) -> bytes:
    return (HEADER + "\n" + line + "\n").encode("utf-8")


@pytest.mark.parametrize(
    "line",
    [
        '{"case_id":"a","query":"q","options":{"limit":3.0}}',
        '{"case_id":"a","query":"q","options":{"limit":3e0}}',
        '{"case_id":"a","query":"q","options":{"floor":true}}',
        '{"case_id":"a","query":"q","options":{"floor":NaN}}',
        '{"case_id":"a","query":"q","options":{"floor":1e400}}',
        '{"case_id":"a","query":"q","options":{"floor":1.5}}',
        '{"case_id":"a","query":"q","options":{"since":18446744073709551616}}',
        '{"case_id":"a","query":"q","expected_sources":[{"source":"s","relevance":4}]}',
        '{"case_id":"a","query":"q","expected_citations":[{"source":"s","paragraph":1,'
        '"section":"\\ud800"}]}',
        '{"case_id":"a","query":"q","typo":1}',
        '\u3000{"case_id":"a","query":"q"}',
        '{"case_id":"\u3000","query":"q"}',
        '{"case_id":"a","query":"q","expected_labels":[" "]}',
        '{"case_id":"a","query":"q","expected_citations":[{"source":"s","paragraph":1,'
        '"quote":"\u3000"}]}',
        '{"case_id":"a","query":"q","expected_associations":[{"subject":"a","label":"\t",'
        '"object":"c"}]}',
        '{"case_id":"a","query":"q","expected_sources":[{"source":" "}]}',
        '{"case_id":"a","query":"\u2029"}',
    ],
)
def test_lines_the_fast_path_leaves_to_the_strict_one(line: str) -> None:
    raw = _one_case(line)
    assert dataset.load_eval_fast(raw, "eval.jsonl") is None
    strict = strict_outcome(raw)
    public: EvalSet | str
    try:
        public = load_eval_text(raw.decode("utf-8"), "eval.jsonl")
    except InputError as error:
        public = str(error)
    if isinstance(strict, str):
        assert public == strict
    else:
        assert isinstance(public, EvalSet)
        assert_same_eval_set(public, strict)


def test_a_repeated_case_id_is_left_to_the_strict_path() -> None:
    line = '{"case_id":"a","query":"q"}'
    raw = (HEADER + "\n" + line + "\n" + line).encode("utf-8")
    assert dataset.load_eval_fast(raw, "eval.jsonl") is None
    assert strict_outcome(raw) == "eval.jsonl: line 3: duplicate case_id 'a'"


def test_nulls_for_extension_fields_and_duplicate_keys_stay_on_the_fast_path() -> None:
    line = (
        '{"case_id":"x","case_id":"a","query":"q","expected_labels":null,'
        '"expected_citations":[{"source":"s","paragraph":1,"section":null},'
        '{"source":"s","paragraph":2}],"options":{"tags":null,"floor":0.4,"limit":null}}'
    )
    raw = _one_case(line)
    fast = dataset.load_eval_fast(raw, "eval.jsonl")
    assert fast is not None
    assert_same_eval_set(fast, load_eval_strict(raw.decode(), "eval.jsonl"))
    case = fast.cases[0]
    assert case.case_id == "a" and case.expected_labels == () and case.options.tags == ()
    assert [c.section_declared for c in case.expected_citations] == [True, False]
    assert case.options.floor == pytest.approx(0.4) and case.options.floor != 0.4
    assert not math.isnan(case.options.floor or 0.0)


def test_demo_eval_set_takes_the_fast_path() -> None:
    raw = (PROJECT_ROOT / "data" / "sake" / "eval.jsonl").read_bytes()
    fast = dataset.load_eval_fast(raw, "eval.jsonl")
    assert fast is not None
    assert_same_eval_set(fast, load_eval_strict(raw.decode(), "eval.jsonl"))


CASE_A = '{"case_id": "a", "query": "q", "expected_concepts": ["c"]}'
CASE_B = '{"case_id": "b", "query": "q", "expected_labels": ["l"]}'


@pytest.mark.parametrize(
    "text",
    [
        f"\n \t\r\n\n{HEADER}\n{CASE_A}\n{CASE_B}\n",  # blank lines before the header
        f"\r\n{HEADER}\r\n{CASE_A}\r\n{CASE_B}",  # CRLF, no final newline
        f"{HEADER}\n{CASE_A}\n\n{CASE_B}\n\n",  # a blank line between cases
        f"{HEADER}\n  {CASE_A}\n{CASE_B}\n",  # an indented case line
    ],
)
def test_the_header_is_found_after_blank_lines_and_lines_keep_their_numbers(text: str) -> None:
    raw = text.encode("utf-8")
    fast = dataset.load_eval_fast(raw, "eval.jsonl")
    assert fast is not None
    assert_same_eval_set(fast, load_eval_strict(text, "eval.jsonl"))


@pytest.mark.parametrize("text", ["", "\n \n\t\n", HEADER, f"\n{HEADER}\n", f"{HEADER}\n\n"])
def test_a_file_without_case_lines_is_left_to_the_strict_path(text: str) -> None:
    assert dataset.load_eval_fast(text.encode("utf-8"), "eval.jsonl") is None


@pytest.mark.parametrize(
    "line",
    [
        # Escapes, surrogate pairs, a NUL, an escaped key: decoded as the strict reader reads them.
        '{"case_id":"a","query":"q","expected_concepts":["\\ud83d\\ude00","\\u0000x","\\/\\t"]}',
        '{"case_id":"a","query":"q","expected_citations":[{"source":"s","paragraph":1,'
        '"s\\u0065ction":null},{"source":"s","paragraph":2,"quote":"\\u00e9"}]}',
        '{"case_id":"a","query":"null","expected_citations":[{"source":"s","paragraph":1}]}',
        '{"case_id":"a","query":"q","expected_sources":[{"source":"s","paragraphs":[3,1,3,1]},'
        '{"source":"t","paragraphs":[]},{"source":"u","relevance":0,"paragraphs":[-0]}]}',
        '{"case_id":"x","case_id":"a","query":"q","expected_concepts":["c"]}',
    ],
)
def test_edge_values_are_decoded_as_the_strict_reader_reads_them(line: str) -> None:
    raw = (
        HEADER + "\n" + line + '\n{"case_id":"b","query":"q","expected_labels":["l"]}\n'
    ).encode()
    fast = dataset.load_eval_fast(raw, "eval.jsonl")
    assert fast is not None
    assert_same_eval_set(fast, load_eval_strict(raw.decode(), "eval.jsonl"))

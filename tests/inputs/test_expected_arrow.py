"""Arrow's reading of the expected table: equal to the object builder, or no answer at all.

The fast loader builds ``expected`` from Arrow's parse of the case lines
(:mod:`taguru_eval.inputs.expected_arrow`) whenever Arrow's rows are plainly
the decoded cases; these tests hold it to the strict loader's table on random
well-formed files, and pin the bytes on which it must give way.
"""

from __future__ import annotations

import subprocess
import sys

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from support.eval_files import HEADER, valid_files
from support.paths import DATA

from taguru_eval.inputs import evalcase
from taguru_eval.inputs.dataset import ABSENT, load_eval_fast, load_eval_strict
from taguru_eval.inputs.expected_arrow import expected_from_arrow, start_reading

DEMO = DATA / "sake" / "eval.jsonl"


def arrow_expected(raw: bytes) -> pl.DataFrame | None:
    """What the fast path gets from Arrow for a file whose header is its first line."""
    offset = raw.index(b"\n") + 1
    table = start_reading(memoryview(raw)[offset:]).result()
    if table is None:
        return None
    strict = load_eval_strict(raw.decode("utf-8"), "eval.jsonl")
    declared = None
    if raw.find(b"null", offset) != -1:
        declared = [
            citation.section is not ABSENT
            for case in strict.cases
            for citation in case.expected_citations
        ]
    case_ids = pl.Series("case_id", strict.case_ids, dtype=pl.String)
    return expected_from_arrow(table, case_ids, declared)


def strict_expected(raw: bytes) -> pl.DataFrame:
    return load_eval_strict(raw.decode("utf-8"), "eval.jsonl").expected


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(raw=valid_files())
def test_arrow_reads_every_well_formed_file_as_the_strict_loader(raw: bytes) -> None:
    expected = arrow_expected(raw)
    assert expected is not None
    strict = strict_expected(raw)
    assert expected.schema == strict.schema
    assert expected.equals(strict)


def test_the_demo_file_is_read_by_arrow() -> None:
    raw = DEMO.read_bytes()
    expected = arrow_expected(raw)
    assert expected is not None and expected.equals(strict_expected(raw))


def _file(*lines: str) -> bytes:
    return "\n".join([HEADER, *lines]).encode("utf-8") + b"\n"


@pytest.mark.parametrize(
    "line",
    [
        # Escapes, surrogate pairs, a NUL, an escaped key: Arrow reads them as msgspec does.
        '{"case_id":"a","query":"q","expected_concepts":["\\ud83d\\ude00","\\u0000x","\\/\\t"]}',
        '{"case_id":"a","query":"q","expected_citations":[{"source":"s","paragraph":1,'
        '"s\\u0065ction":null},{"source":"s","paragraph":2,"quote":"\\u00e9"}]}',
        '{"case_id":"a","query":"null","expected_citations":[{"source":"s","paragraph":1}]}',
        '{"case_id":"a","query":"q","expected_sources":[{"source":"s","paragraphs":[3,1,3,1]},'
        '{"source":"t","paragraphs":[]},{"source":"u","relevance":0,"paragraphs":[-0]}]}',
    ],
)
def test_arrow_reads_edge_values_as_the_strict_loader(line: str) -> None:
    raw = _file(line, '{"case_id":"b","query":"q","expected_labels":["l"]}')
    expected = arrow_expected(raw)
    assert expected is not None and expected.equals(strict_expected(raw))
    fast = load_eval_fast(raw, "eval.jsonl")
    assert fast is not None and fast.expected.equals(strict_expected(raw))


def test_a_repeated_key_is_refused_by_arrow_and_the_objects_answer() -> None:
    raw = _file('{"case_id":"x","case_id":"a","query":"q","expected_concepts":["c"]}')
    assert start_reading(memoryview(raw)[raw.index(b"\n") + 1 :]).result() is None
    fast = load_eval_fast(raw, "eval.jsonl")
    assert fast is not None and fast.expected.equals(strict_expected(raw))


def test_rows_that_are_not_the_cases_are_refused() -> None:
    raw = _file('{"case_id":"a","query":"q"}', '{"case_id":"b","query":"q"}')
    table = start_reading(memoryview(raw)[raw.index(b"\n") + 1 :]).result()
    assert table is not None
    wrong_order = pl.Series("case_id", ["b", "a"], dtype=pl.String)
    assert expected_from_arrow(table, wrong_order, None) is None
    too_few = pl.Series("case_id", ["a"], dtype=pl.String)
    assert expected_from_arrow(table, too_few, None) is None
    assert expected_from_arrow(table, pl.Series("case_id", ["a", "b"]), [True]) is None


def test_a_line_longer_than_arrows_block_is_read_whole() -> None:
    long_query = "長" * (1 << 21)  # 6 MiB of UTF-8, past Arrow's 4 MiB block
    raw = _file(
        '{"case_id":"z","query":"q","expected_labels":["l"]}',
        f'{{"case_id":"a","query":"{long_query}","expected_concepts":["c"]}}',
    )
    expected = arrow_expected(raw)
    assert expected is not None and expected.equals(strict_expected(raw))


@pytest.mark.parametrize(
    "case_lines",
    [["null"], [" null"], ["", "null", '{"case_id":"a","query":"q"}'], ["1"], ['"x"']],
    ids=["null", "spaced-null", "null-after-blank", "number", "string"],
)
def test_a_line_that_is_no_object_never_reaches_arrow(case_lines: list[str]) -> None:
    """pyarrow's JSON reader kills the process on a ``null`` where its reading
    begins: such a file goes to the strict loader without Arrow (run in a child,
    so a regression fails this test instead of the whole session)."""
    raw = _file(*case_lines)
    script = (
        "import sys\n"
        "from taguru_eval.errors import InputError\n"
        "from taguru_eval.inputs.dataset import load_eval_fast, load_eval_text\n"
        "raw = sys.stdin.buffer.read()\n"
        "assert load_eval_fast(raw, 'eval.jsonl') is None\n"
        "try:\n"
        "    load_eval_text(raw.decode(), 'eval.jsonl')\n"
        "except InputError as error:\n"
        "    print(error.exit_code)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], input=raw, capture_output=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    assert done.stdout.decode().strip() == "2"


def _never_asked() -> list[bool]:
    raise AssertionError("section flags were read from the cases")


def test_section_flags_are_read_from_the_cases_only_when_a_section_is_null() -> None:
    ids = pl.Series("case_id", ["a"], dtype=pl.String)
    # "null" in the bytes, but every citation declares a section: the flags are never needed.
    raw = _file(
        '{"case_id":"a","query":"null","expected_citations":[{"source":"s","paragraph":1,'
        '"section":"x"}]}'
    )
    checked = start_reading(memoryview(raw)[raw.index(b"\n") + 1 :]).expected(ids, _never_asked)
    assert checked is not None and not checked.breaks_a_rule
    assert checked.table.equals(strict_expected(raw))
    raw = _file(
        '{"case_id":"a","query":"q","expected_citations":[{"source":"s","paragraph":1,'
        '"section":null},{"source":"s","paragraph":2}]}'
    )
    asked: list[bool] = []

    def flags() -> list[bool]:
        asked.append(True)
        return [True, False]

    checked = start_reading(memoryview(raw)[raw.index(b"\n") + 1 :]).expected(ids, flags)
    assert asked == [True]
    assert checked is not None and checked.table.equals(strict_expected(raw))
    assert checked.table["section_declared"].to_list() == [True, False]


def test_arrow_judges_the_value_rules_on_its_thread() -> None:
    raw = _file('{"case_id":"a","query":"q","expected_labels":["l", " \\u3000"]}')
    ids = pl.Series("case_id", ["a"], dtype=pl.String)
    checked = start_reading(memoryview(raw)[raw.index(b"\n") + 1 :]).expected(ids, _never_asked)
    assert checked is not None and checked.breaks_a_rule
    assert load_eval_fast(raw, "eval.jsonl") is None


def test_a_row_bound_too_large_for_one_sort_key_sorts_by_two(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    cases = load_eval_strict(DEMO.read_text("utf-8"), "eval.jsonl").cases
    one_key = evalcase.expected_frame(cases)
    assemble = evalcase.assemble
    bounds: list[int] = []

    def with_huge_bound(
        entries: dict[str, pl.LazyFrame], case_ids: pl.Series, max_rows: int
    ) -> pl.LazyFrame:
        bounds.append(max_rows)
        return assemble(entries, case_ids, 1 << 62)

    monkeypatch.setattr(evalcase, "assemble", with_huge_bound)
    assert len(evalcase._file_order(1 << 62, len(cases))) == 2  # the two-key branch
    assert evalcase.expected_frame(cases).equals(one_key)
    assert len(bounds) == 1 and bounds[0] >= one_key.height

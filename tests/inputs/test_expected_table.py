"""The ``expected`` table against a row-by-row reading of the loaded cases.

Both readers of eval.jsonl (the loader's decoding and the strict reader) build
the table with :func:`taguru_eval.inputs.expected.expected_frame`; this holds it
to the docstring of :mod:`taguru_eval.inputs.expected` written out as a plain
loop (the old row-by-row builder, ``serde_json_oracle.expected_rows``): rows by
case, then kind, then declaration; one source row per distinct listed
paragraph (a null paragraph when none is listed), numbered per case.
"""

from __future__ import annotations

import json
import random

import pytest
from hypothesis import HealthCheck, given, settings
from support import serde_json_oracle as oracle
from support.eval_files import valid_files
from support.paths import DATA

from taguru_eval.inputs import expected
from taguru_eval.inputs.dataset import load_eval_fast, load_eval_strict
from taguru_eval.tables import EXPECTED


def assert_both_builders_give_the_loop_rows(raw: bytes) -> None:
    strict = load_eval_strict(raw.decode("utf-8"), "eval.jsonl")
    fast = load_eval_fast(raw, "eval.jsonl")
    assert fast is not None
    wanted = oracle.expected_rows(strict.cases).to_dicts()
    assert strict.expected.schema == EXPECTED
    assert strict.expected.to_dicts() == wanted
    assert fast.expected.to_dicts() == wanted


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(raw=valid_files())
def test_both_builders_give_the_rows_of_a_plain_loop(raw: bytes) -> None:
    assert_both_builders_give_the_loop_rows(raw)


def test_a_large_file_keeps_declaration_order() -> None:
    # Large enough for Polars to sort in parallel, where only a total key keeps order.
    generator = random.Random(15)
    lines = ['{"taguru_eval": 1}']
    for number in range(4000):
        paragraphs = [generator.randrange(4) for _ in range(generator.randrange(4))]
        concepts = [f"c{generator.randrange(9)}" for _ in range(generator.randrange(5))]
        citations = [
            {"source": f"s{generator.randrange(3)}", "paragraph": generator.randrange(9)}
            for _ in range(generator.randrange(4))
        ]
        case = {
            "case_id": f"case-{number}",
            "query": "q",
            "expected_sources": [
                {"source": f"s{index}", "paragraphs": paragraphs[index:]} for index in range(3)
            ],
            "expected_concepts": concepts,
            "expected_labels": concepts[::-1],
            "expected_citations": citations,
        }
        lines.append(json.dumps(case))
    assert_both_builders_give_the_loop_rows(("\n".join(lines) + "\n").encode())


def test_a_row_bound_too_large_for_one_sort_key_sorts_by_two(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    cases = load_eval_strict((DATA / "sake" / "eval.jsonl").read_text("utf-8"), "eval.jsonl").cases
    one_key = expected.expected_frame(cases)
    file_order = expected._file_order
    assert len(file_order(1 << 62, len(cases))) == 2  # the two-key branch
    monkeypatch.setattr(expected, "_file_order", lambda _rows, count: file_order(1 << 62, count))
    assert expected.expected_frame(cases).equals(one_key)

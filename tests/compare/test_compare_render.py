"""changes.jsonl rendering in Polars equals the per-value Python spelling.

The record lines are assembled by Polars string expressions for speed; these
tests pin them to the reference spelling (``repr`` floats, ``null`` for a
non-finite number, compact JSON with only ``"``, ``\\`` and control
characters escaped in a case_id), so a change in Polars' float formatting
fails here rather than silently changing bytes.
"""

from __future__ import annotations

import json
import math
import sys

import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st

from taguru_eval.compare import compare
from taguru_eval.compare.report import _dumps, _number, _number_text

EDGES = [
    0.0,
    -0.0,
    1.0,
    3.0,
    0.1 + 0.2,
    1e-4,
    math.nextafter(1e-4, 0.0),
    -math.nextafter(1e-4, 0.0),
    1e16,
    math.nextafter(1e16, 0.0),
    -1e16,
    5e-324,
    sys.float_info.max,
    -sys.float_info.max,
    1e308 - -1e308,
    -math.inf,
    math.nan,
    None,
    123456789012345.6,
    2.5e-3,
]


def test_number_text_matches_number_on_the_edges() -> None:
    texts = _number_text(pl.Series(EDGES, dtype=pl.Float64)).to_list()
    assert texts == [_number(value) for value in EDGES]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(st.none(), st.floats()), max_size=50))
def test_number_text_matches_number(values: list[float | None]) -> None:
    texts = _number_text(pl.Series(values, dtype=pl.Float64)).to_list()
    assert texts == [_number(value) for value in values]


def _doc(case_ids: list[str], value: float) -> dict[str, object]:
    return {
        "taguru_evaluation": 1,
        "corpus": {"stable": True},
        "cases": [
            {"case_id": case_id, "recall": {"recall_at_k": value, "mrr": 1.0, "ndcg": 0.5}}
            for case_id in case_ids
        ],
    }


def test_case_ids_are_escaped_like_json() -> None:
    ids = ['quote"d', "back\\slash", "new\nline", "unit\x1fsep", "del\x7f", "日本酒", "plain"]
    result = compare(_doc(ids, 1.0), _doc([*ids, "only-head"], 1e-5))
    lines = result.changes_jsonl("2026-07-29T00:00:00Z").split("\n")
    assert lines[-1] == ""
    body = lines[1:-1]
    assert len(body) == len(ids) + 1
    by_id = {json.loads(line)["case_id"]: line for line in body}
    for case_id in ids:
        line = by_id[case_id]
        assert line.startswith(f'{{"kind":"regressed","case_id":{_dumps(case_id)},"metrics":[')
        assert '"delta":-0.99999' in line
        assert '"head":1e-05' in line
    assert by_id["only-head"] == (
        '{"kind":"added","case_id":"only-head","metrics":['
        '{"metric":"recall.recall_at_k","sides":{"base":null,"head":1e-05},'
        '"delta":null,"direction":"not_comparable"},'
        '{"metric":"recall.mrr","sides":{"base":null,"head":1.0},'
        '"delta":null,"direction":"not_comparable"},'
        '{"metric":"recall.ndcg","sides":{"base":null,"head":0.5},'
        '"delta":null,"direction":"not_comparable"}]}'
    )


def test_no_changed_case_renders_the_header_only() -> None:
    result = compare(_doc(["a"], 1.0), _doc(["a"], 1.0))
    text = result.changes_jsonl("2026-07-29T00:00:00Z")
    assert text.count("\n") == 1
    assert text.endswith("}\n")
    assert result.records() == []


def test_an_added_case_without_values_has_an_empty_metric_list() -> None:
    base = _doc([], 1.0)
    head = {"taguru_evaluation": 1, "corpus": {"stable": True}, "cases": [{"case_id": "x"}]}
    lines = compare(base, head).changes_jsonl("2026-07-29T00:00:00Z").splitlines()
    assert lines[1] == '{"kind":"added","case_id":"x","metrics":[]}'


def test_the_summary_escapes_control_characters_and_keeps_every_other_byte() -> None:
    # A case_id is the user's text: on a terminal it must not colour the screen
    # or forge a line of its own.
    hostile = "\x1b[31mRED\nFAKE: all good"
    ids = [hostile, "plain", "tab\there"]
    text = compare(_doc(ids, 1.0), _doc(ids, 0.5)).summary("out\x07.jsonl")
    assert "\x1b" not in text and "\x07" not in text and "\t" not in text
    lines = text.splitlines()
    assert "    regressed: \\u{1b}[31mRED\\nFAKE: all good (recall.recall_at_k -0.500)" in lines
    assert "    regressed: tab\\there (recall.recall_at_k -0.500)" in lines
    assert not any(line.startswith("FAKE") for line in lines)
    assert lines[-1] == "  wrote out\\u{7}.jsonl"
    # The same comparison with harmless ids prints the same bytes elsewhere.
    plain = compare(_doc(["a", "plain", "b"], 1.0), _doc(["a", "plain", "b"], 0.5)).summary("o")
    assert [line for line in lines if "regressed:" not in line][:-1] == [
        line for line in plain.splitlines() if "regressed:" not in line
    ][:-1]
    assert "    regressed: plain (recall.recall_at_k -0.500)" in plain.splitlines()

"""bm25.json, every case, plus the recorded sources_search fixture (HTTP.md §9.4)."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from support.paths import EXAMPLES, WIRE
from support.vectors import vector_cases, vector_doc

from taguru_eval._base.text import json_f32
from taguru_eval.corpus.paragraphs import split_paragraphs
from taguru_refserver import bm25
from taguru_refserver.bm25 import PassageIndex, ScoredParagraph, f32, idf

HIT_KEYS = {
    "hits",
    "top",
    "top_source",
    "top_text",
    "top_text_contains",
    "contains_source",
    "excludes_sources",
    "all_sources_in",
    "empty",
    "nonempty",
    "len",
    "min_len",
    "top_score_greater_than",
    "top_strictly_ahead",
    "equal_scores",
    "scores_equal_case",
    "top_score_greater_than_case",
}
IDF_KEYS = {"value", "greater_than"}
# The vector notes: "input.limit (server default 10)".
VECTOR_DEFAULT_LIMIT = 10
HTTP_DEFAULT_LIMIT = 5


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (0.0, "0.0"),
        (1.0, "1.0"),
        (100.0, "100.0"),
        (2.5, "2.5"),
        (0.54696476, "0.54696476"),
        (0.000001, "0.000001"),
        (1e-7, "1e-7"),
        (1e14, "1e14"),
        (3.4028235e38, "3.4028235e38"),
        (123456790.0, "123456790.0"),
    ],
)
def test_wire_spelling_helper(value: float, text: str) -> None:
    assert json_f32(value) == text


_CASES_BY_NAME = {case["name"]: case for case in vector_doc("bm25")["cases"]}


def _populate(corpus: list[dict[str, Any]]) -> tuple[PassageIndex, dict[tuple[str, int], str]]:
    index = PassageIndex()
    texts: dict[tuple[str, int], str] = {}
    for entry in corpus:
        paragraphs = split_paragraphs(entry["text"])
        questions: dict[int, list[str]] = {}
        for paragraph, question in entry.get("questions", []):
            questions.setdefault(paragraph, []).append(question)
        index.put_source(entry["source"], paragraphs, extra_terms_by_paragraph=questions)
        for number, text in enumerate(paragraphs):
            texts[(entry["source"], number)] = text
    return index, texts


def _search(given: dict[str, Any]) -> tuple[list[ScoredParagraph], dict[tuple[str, int], str]]:
    index, texts = _populate(given["corpus"])
    eligible_sources = given.get("eligible_sources")
    eligible = None if eligible_sources is None else set(eligible_sources).__contains__
    hits = index.search(given["query"], given.get("limit", VECTOR_DEFAULT_LIMIT), eligible)
    return hits, texts


@pytest.mark.parametrize("case", vector_cases("bm25"))
def test_bm25_vector(case: dict[str, Any]) -> None:
    given, expected = case["input"], case["expected"]
    if case.get("check") == "idf":
        unknown = set(expected) - IDF_KEYS
        assert not unknown, f"unhandled expected keys {unknown}"
        value = idf(given["live_paragraphs"], given["carriers"])
        if "value" in expected:
            assert json_f32(value) == expected["value"]
        if "greater_than" in expected:
            assert value > expected["greater_than"]
        return
    assert case.get("check") is None, f"unknown check {case['check']!r}"
    unknown = set(expected) - HIT_KEYS
    assert not unknown, f"unhandled expected keys {unknown}"
    hits, texts = _search(given)
    sources = [hit.source for hit in hits]
    if "hits" in expected:
        got = [[hit.source, hit.paragraph, json_f32(hit.score)] for hit in hits]
        assert got == expected["hits"]
    if "top" in expected:
        assert [hits[0].source, hits[0].paragraph] == expected["top"]
    if "top_source" in expected:
        assert hits[0].source == expected["top_source"]
    if "top_text" in expected:
        assert texts[(hits[0].source, hits[0].paragraph)] == expected["top_text"]
    if "top_text_contains" in expected:
        assert expected["top_text_contains"] in texts[(hits[0].source, hits[0].paragraph)]
    if "contains_source" in expected:
        assert expected["contains_source"] in sources
    for source in expected.get("excludes_sources", []):
        assert source not in sources
    if "all_sources_in" in expected:
        assert set(sources) <= set(expected["all_sources_in"])
    if "empty" in expected:
        assert (hits == []) is expected["empty"]
    if "nonempty" in expected:
        assert (hits != []) is expected["nonempty"]
    if "len" in expected:
        assert len(hits) == expected["len"]
    if "min_len" in expected:
        assert len(hits) >= expected["min_len"]
    if "top_score_greater_than" in expected:
        assert hits[0].score > expected["top_score_greater_than"]
    if expected.get("top_strictly_ahead") and len(hits) > 1:
        assert hits[0].score > hits[1].score
    if "equal_scores" in expected:
        first, second = expected["equal_scores"]
        assert hits[first].score == hits[second].score
    if "scores_equal_case" in expected:
        other, _ = _search(_CASES_BY_NAME[expected["scores_equal_case"]]["input"])
        other_scores = {(hit.source, hit.paragraph): hit.score for hit in other}
        for hit in hits:
            assert hit.score == other_scores[(hit.source, hit.paragraph)]
    if "top_score_greater_than_case" in expected:
        other, _ = _search(_CASES_BY_NAME[expected["top_score_greater_than_case"]]["input"])
        assert hits[0].score > (other[0].score if other else 0.0)


def _replay(fixture: dict[str, Any], index: PassageIndex, eligible: set[str] | None) -> None:
    """Search as the recorded request does and compare every recorded hit field we own."""
    request = fixture["request"]
    limit = request.get("limit")
    limit = HTTP_DEFAULT_LIMIT if limit is None else limit
    hits = index.search(
        request["query"], limit, None if eligible is None else eligible.__contains__
    )
    recorded = fixture["response"]["result"]["hits"]
    assert len(hits) == len(recorded)
    for rank, (hit, want) in enumerate(zip(hits, recorded, strict=True), start=1):
        assert (hit.source, hit.paragraph) == (want["source"], want["paragraph"])
        # Recorded numbers are binary32 values printed shortest; compare as binary32.
        assert hit.score == f32(want["score"])
        assert json_f32(hit.score) == repr(want["score"])
        assert want["lanes"]["bm25"] == {"rank": rank, "score": want["score"]}


def test_wire_sources_search_replays_exactly() -> None:
    fixture = json.loads((WIRE / "sources_search.json").read_text(encoding="utf-8"))
    # The fixture's corpus: one source whose only paragraph is the recorded hit text.
    hit = fixture["response"]["result"]["hits"][0]
    index = PassageIndex()
    index.put_source(hit["source"], split_paragraphs(hit["text"]))
    _replay(fixture, index, None)
    assert json_f32(index.search(fixture["request"]["query"], 5)[0].score) == "0.28768212"


OFFLINE_CORPUS = {
    "corpus/brewery.md": "青嶺は青嶺酒造が造る銘柄です。",
    "corpus/filter-a.md": "共通見出し語句。蔵元の説明文はここにある。",
    "corpus/filter-b.md": "共通見出し語句。原料米の説明文はここにある。",
    "corpus/ledger.md": "杜氏見習いの日誌帳を几帳面につける。",
    "corpus/unrelated.md": "梅雨明けの空に入道雲が広がった。",
}


def test_example_filtered_search_keeps_corpus_wide_statistics() -> None:
    # HTTP.md §10.2 offline corpus; tags {"蔵"} leave only filter-a eligible.
    fixture = json.loads((EXAMPLES / "sources_search_filtered.json").read_text(encoding="utf-8"))
    index = PassageIndex()
    for source, text in OFFLINE_CORPUS.items():
        index.put_source(source, split_paragraphs(text))
    _replay(fixture, index, {"corpus/filter-a.md"})


def test_example_evaluate_search_on_smoke_corpus() -> None:
    fixture = json.loads((EXAMPLES / "sources_search_evaluate.json").read_text(encoding="utf-8"))
    index = PassageIndex()
    index.put_source("corpus/brewery.md", ["青嶺は青嶺酒造が造る銘柄です。"])
    _replay(fixture, index, None)


def test_put_source_replaces_wholesale_and_remove_forgets() -> None:
    index = PassageIndex()
    index.put_source("a.md", ["杜氏の話。", "蔵の話。"])
    index.put_source("b.md", ["杜氏の話。"])
    assert index.live_paragraphs == 3
    index.put_source("a.md", ["新しい本文。"])
    assert index.live_paragraphs == 2
    assert [hit.source for hit in index.search("杜氏", 10)] == ["b.md"]
    assert index.remove_source("b.md") is True
    assert index.remove_source("b.md") is False
    assert index.search("杜氏", 10) == []
    assert index.live_paragraphs == 1


def test_zero_limit_and_termless_query_serve_nothing() -> None:
    index = PassageIndex()
    index.put_source("a.md", ["杜氏の話。"])
    assert index.search("杜氏", 0) == []
    assert index.search("。。", 5) == []


def test_scores_are_binary32_values() -> None:
    index = PassageIndex()
    index.put_source("a.md", ["the quick brown fox", "a lazy dog"])
    for hit in index.search("quick dog", 5):
        assert hit.score == f32(hit.score)
        assert math.isfinite(hit.score)


def test_idf_uses_the_c_library_logf_not_the_correctly_rounded_log(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # HTTP.md §9.4: for N = n = 17 glibc's logf is one binary32 step below the
    # correctly rounded value; the fallback (no libm) gives the latter.
    assert json_f32(idf(17, 17)) == "0.028170932"
    monkeypatch.setattr(bm25, "logf", bm25._correctly_rounded_logf)
    assert json_f32(bm25.idf(17, 17)) == "0.028170934"

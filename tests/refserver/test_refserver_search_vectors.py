"""The bm25 conformance vectors replayed through ``POST …/sources/search`` over HTTP.

The algorithm has its own unit tests (test_bm25*.py); this runs the same cases
end to end — store over HTTP, search over HTTP, read the scores as the exact
text on the wire — so the route's ordering, paragraph texts, eligibility
filter and binary32 score spelling are checked too. An ``eligible_sources``
set becomes a tag filter (corpus statistics stay corpus-wide either way).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from support.refserver import context_path, in_process
from support.vectors import vector_cases, vector_doc

NAME = "vectors"
ELIGIBLE_TAG = "eligible"
CASES = {case["name"]: case for case in vector_doc("bm25")["cases"]}
UNDERSTOOD = {
    "hits", "top", "top_source", "top_text", "top_text_contains", "contains_source",
    "excludes_sources", "all_sources_in", "empty", "nonempty", "len", "min_len",
    "top_score_greater_than", "top_strictly_ahead", "equal_scores", "scores_equal_case",
    "top_score_greater_than_case",
}  # fmt: skip

Hit = tuple[str, int, str, str]  # source, paragraph, score text, paragraph text


async def served_hits(case: dict[str, Any]) -> list[Hit]:
    data = case["input"]
    eligible = data.get("eligible_sources")
    passages = {doc["source"]: doc["text"] for doc in data["corpus"]}
    request: dict[str, Any] = {"passages": passages}
    questions = {
        doc["source"]: [{"paragraph": p, "question": q} for p, q in doc["questions"]]
        for doc in data["corpus"]
        if doc.get("questions")
    }
    if questions:
        request["questions"] = questions
    if eligible is not None:
        request["tags"] = {source: [ELIGIBLE_TAG] for source in eligible if source in passages}
    search: dict[str, Any] = {"query": data["query"], "limit": data.get("limit", 10)}
    if eligible is not None:
        search["tags"] = [ELIGIBLE_TAG]
    async with in_process() as server:
        await server.create(NAME)
        await server.store(NAME, request)
        response = await server.call("POST", context_path(NAME, "/sources/search"), search)
    assert response.status_code == 200, response.text
    # parse_float=str keeps each score exactly as the server spelled it
    page = json.loads(response.text, parse_float=str)["result"]
    return [(h["source"], h["paragraph"], h["score"], h["text"]) for h in page["hits"]]


def top_score(hits: list[Hit]) -> float:
    return float(hits[0][2]) if hits else 0.0


@pytest.mark.parametrize(
    "case", [c for c in vector_cases("bm25") if c.values[0].get("check") is None]
)
async def test_bm25_vector_over_http(case: dict[str, Any]) -> None:
    expected = case["expected"]
    unknown = set(expected) - UNDERSTOOD
    assert not unknown, f"expected keys this test does not understand: {sorted(unknown)}"
    hits = await served_hits(case)
    sources = [hit[0] for hit in hits]
    for key, value in expected.items():
        if key == "hits":
            assert [[s, p, score] for s, p, score, _ in hits] == value
        elif key == "top":
            assert [hits[0][0], hits[0][1]] == value
        elif key == "top_source":
            assert hits[0][0] == value
        elif key == "top_text":
            assert hits[0][3] == value
        elif key == "top_text_contains":
            assert value in hits[0][3]
        elif key == "contains_source":
            assert value in sources
        elif key == "excludes_sources":
            assert not set(value) & set(sources)
        elif key == "all_sources_in":
            assert set(sources) <= set(value)
        elif key == "empty":
            assert (not hits) is value
        elif key == "nonempty":
            assert bool(hits) is value
        elif key == "len":
            assert len(hits) == value
        elif key == "min_len":
            assert len(hits) >= value
        elif key == "top_score_greater_than":
            assert top_score(hits) > value
        elif key == "top_strictly_ahead":
            assert len(hits) < 2 or float(hits[0][2]) > float(hits[1][2])
        elif key == "equal_scores":
            first, second = value
            assert hits[first][2] == hits[second][2]
        elif key == "scores_equal_case":
            reference = {(s, p): score for s, p, score, _ in await served_hits(CASES[value])}
            assert all(reference[(s, p)] == score for s, p, score, _ in hits)
        elif key == "top_score_greater_than_case":
            assert top_score(hits) > top_score(await served_hits(CASES[value]))

"""Scoring and aggregation: EVALUATE.md §9.4 worked examples and §5.2 sample sets."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import polars as pl
import pytest
from support.scoring import FAILED_PASSAGE, eval_case, run_cases, score_one, searched

from taguru_eval import catalog
from taguru_eval.score.aggregate import score_run
from taguru_eval.tables import EXPECTED as EXPECTED_SCHEMA
from taguru_eval.tables import build_tables
from taguru_eval.tables.schemas import CASES


def hit(source: str, paragraph: int = 0, score: float = 0.5) -> dict[str, Any]:
    return {"source": source, "paragraph": paragraph, "score": score, "lanes": {}}


def cue(names: list[str], kind: str = "concept", latency: int = 1, **extra: Any) -> dict[str, Any]:
    resolution: dict[str, Any] = {
        "cue": "q",
        "kind": kind,
        "resolved_names": names,
        "tier": "lexical",
        "limit": 5,
        "latency_ms": latency,
    }
    resolution.update(extra)
    return resolution


def resolved(name: str, latency: int = 1) -> dict[str, Any]:
    return {"outcome": "resolved", "name": name, "tier": "lexical", "latency_ms": latency}


def probe(query: dict[str, Any] | None, latency: int = 1) -> dict[str, Any]:
    out: dict[str, Any] = {
        "subject_cue": "s",
        "label_cue": "l",
        "object_cue": "o",
        "subject": resolved("s", latency),
        "label": resolved("l", latency),
        "object": resolved("o", latency),
    }
    if query is not None:
        out["query"] = query
    return out


def check(served: bool, outcome: str = "resolved", **fields: Any) -> dict[str, Any]:
    base: dict[str, Any] = {"source": "a.md", "paragraph": 0, "served": served, "outcome": outcome}
    if outcome == "resolved":
        base["section"] = fields.pop("section", {"check": "not_checked"})
    else:
        base["code"] = fields.pop("code", None)
        base["message"] = fields.pop("message", "boom")
    base.update(fields)
    base.setdefault("latency_ms", 1)
    return base


SOURCES_A3_B1 = [
    {"source": "A.md", "paragraphs": [], "relevance": 3},
    {"source": "B.md", "paragraphs": [], "relevance": 1},
]


# --------------------------------------------------------------------------- §9.4 recall


def test_worked_ndcg_example() -> None:  # 53
    block = score_one(
        eval_case(expected_sources=SOURCES_A3_B1),
        searched([hit("A.md", 0), hit("A.md", 1), hit("B.md", 4)]),
        None,
        [],
    )["recall"]
    assert block["expected_total"] == 2 and block["matched"] == 2
    assert block["recall_at_k"] == 1.0 and block["mrr"] == 1.0
    assert block["ndcg"] == pytest.approx(0.9639, abs=1e-3)
    assert list(block) == ["recall_at_k", "mrr", "ndcg", "expected_total", "matched"]


def test_ideal_order_is_one_and_reversed_is_less() -> None:  # 54
    case = eval_case(expected_sources=SOURCES_A3_B1)
    ideal = score_one(case, searched([hit("A.md"), hit("B.md")]), None, [])["recall"]
    reverse = score_one(case, searched([hit("B.md"), hit("A.md")]), None, [])["recall"]
    assert ideal["ndcg"] == 1.0
    assert reverse["ndcg"] < 1.0


def test_relevance_zero_is_not_judged() -> None:  # 55
    extra = [*SOURCES_A3_B1[:1], {"source": "Z.md", "paragraphs": [], "relevance": 0}]
    block = score_one(eval_case(expected_sources=extra), searched([hit("A.md")]), None, [])
    assert block["recall"]["expected_total"] == 1
    only_zero = [{"source": "Z.md", "paragraphs": [], "relevance": 0}]
    assert "recall" not in score_one(eval_case(expected_sources=only_zero), searched([]), None, [])


@pytest.mark.parametrize(("paragraph", "matched"), [(0, 0), (2, 1)])
def test_paragraph_restricted(paragraph: int, matched: int) -> None:  # 56
    sources = [{"source": "a.md", "paragraphs": [2], "relevance": 1}]
    block = score_one(
        eval_case(expected_sources=sources), searched([hit("a.md", paragraph)]), None, []
    )
    assert block["recall"]["matched"] == matched


def test_score_is_never_read() -> None:  # 57
    case = eval_case(expected_sources=SOURCES_A3_B1)
    low = score_one(case, searched([hit("B.md", score=0.01), hit("A.md", score=0.01)]), None, [])
    high = score_one(case, searched([hit("B.md", score=99.0), hit("A.md", score=99.0)]), None, [])
    assert low["recall"] == high["recall"]


def test_two_wildcards_one_hit_clamped_to_one() -> None:  # 58
    sources = [
        {"source": "a.md", "paragraphs": [], "relevance": 3},
        {"source": "a.md", "paragraphs": [], "relevance": 2},
    ]
    block = score_one(eval_case(expected_sources=sources), searched([hit("a.md")]), None, [])
    assert block["recall"]["ndcg"] == 1.0


def test_recall_is_one_item_per_entry_and_mrr_uses_first_satisfying_rank() -> None:
    sources = [
        {"source": "x.md", "paragraphs": [4, 5, 4], "relevance": 2},
        {"source": "y.md", "paragraphs": [], "relevance": 1},
    ]
    block = score_one(
        eval_case(expected_sources=sources),
        searched([hit("z.md"), hit("x.md", 5), hit("x.md", 4)]),
        None,
        [],
    )["recall"]
    assert block["expected_total"] == 2 and block["matched"] == 1
    assert block["recall_at_k"] == 0.5 and block["mrr"] == 0.5


# --------------------------------------------------------------------------- coverage


def test_coverage_folding_and_partial() -> None:  # 59
    structural = {"cues": [cue(["りんご"]), cue(["apple"], kind="label")], "associations": []}
    block = score_one(
        eval_case(expected_concepts=["リンゴ", "存在しない"], expected_labels=["Ａｐｐｌｅ"]),
        searched([]),
        structural,
        [],
    )
    assert block["coverage"]["concepts"] == {"expected": 2, "matched": 1, "value": 0.5}
    assert block["coverage"]["labels"] == {"expected": 1, "matched": 1, "value": 1.0}


def test_concept_names_do_not_match_labels() -> None:
    structural = {"cues": [cue(["x"], kind="label")], "associations": []}
    block = score_one(eval_case(expected_concepts=["x"]), searched([]), structural, [])
    assert block["coverage"]["concepts"]["matched"] == 0


def test_association_coverage_one_of_three() -> None:  # 60
    queried = {"outcome": "queried", "total": 1, "matches": 1, "latency_ms": 1}
    zero = {"outcome": "queried", "total": 0, "matches": 0, "latency_ms": 1}
    declared = [{"subject": "s", "label": "l", "object": "o"}] * 3
    structural = {"cues": [], "associations": [probe(queried), probe(zero), probe(None)]}
    block = score_one(eval_case(expected_associations=declared), searched([]), structural, [])
    assert block["coverage"] == {"associations": {"expected": 3, "matched": 1, "value": 1 / 3}}


# --------------------------------------------------------------------------- citations


def test_citations_recall_and_validity_are_separate() -> None:  # 64
    declared = [{"source": "a.md", "paragraph": 0}, {"source": "a.md", "paragraph": 1}]
    checks = [check(False), check(True, "unresolved", code="no_paragraph")]
    block = score_one(eval_case(expected_citations=declared), searched([]), None, checks)
    assert block["citations"]["recall"] == {"expected_total": 2, "matched": 1, "value": 0.5}
    assert block["citations"]["validity"] == {"expected_total": 2, "valid": 1, "value": 0.5}


@pytest.mark.parametrize(
    ("fields", "valid"),
    [
        ({}, 1),
        ({"section": {"check": "mismatched", "expected": None}}, 0),
        ({"section": {"check": "matched", "expected": "x"}}, 1),
        ({"quote": {"declared": "q", "matched": False}}, 0),
        ({"quote": {"declared": "q", "matched": True}}, 1),
    ],
)
def test_validity_rules(fields: dict[str, Any], valid: int) -> None:  # 63
    declared = [{"source": "a.md", "paragraph": 0}]
    block = score_one(
        eval_case(expected_citations=declared), searched([]), None, [check(True, **fields)]
    )
    assert block["citations"]["validity"]["valid"] == valid


def test_failed_passage_still_scores_citations() -> None:  # 66
    declared = [{"source": "a.md", "paragraph": 0}]
    block = score_one(eval_case(expected_citations=declared), FAILED_PASSAGE, None, [check(False)])
    assert block["citations"]["recall"]["matched"] == 0
    assert block["citations"]["validity"]["valid"] == 1
    assert "diversity_sources" not in block


def test_no_declared_citations_no_block() -> None:  # 67
    assert "citations" not in score_one(eval_case(), searched([]), None, [])


# --------------------------------------------------------------------------- missed / lane cross


def test_missed_cap_and_truncation() -> None:  # 69
    sources = [
        {"source": "a.md", "paragraphs": [], "relevance": 1},
        {"source": "b.md", "paragraphs": [], "relevance": 1},
    ]
    four = score_one(
        eval_case(expected_sources=sources, expected_concepts=["x", "y"]), searched([]), None, []
    )
    assert len(four["missed"]) == 3 and four["missed_truncated"] == 1
    three = score_one(
        eval_case(expected_sources=sources, expected_concepts=["x"]), searched([]), None, []
    )
    assert len(three["missed"]) == 3 and three["missed_truncated"] == 0


def test_failed_passage_is_silent_about_sources() -> None:  # 71, 72
    block = score_one(
        eval_case(
            expected_sources=[{"source": "a.md", "paragraphs": [], "relevance": 1}],
            expected_concepts=["x"],
        ),
        FAILED_PASSAGE,
        {"cues": [cue(["x"])], "associations": []},
        [],
    )
    assert block["missed"] == [] and block["missed_truncated"] == 0
    assert "recall" not in block and "lane_cross" not in block and "coverage" in block


def test_lane_cross_tab_and_metrics() -> None:  # 73, 74 via real cases
    def entry(structural_hit: bool, passage_hit: bool) -> tuple[Any, Any, Any, list[Any]]:
        case = eval_case(
            expected_sources=[{"source": "a.md", "paragraphs": [], "relevance": 1}],
            expected_concepts=["x"],
        )
        hits = [hit("a.md")] if passage_hit else []
        names = ["x"] if structural_hit else []
        return case, searched(hits), {"cues": [cue(names)], "associations": []}, []

    pairs = [(True, True), (True, False), (False, True), (False, False), (False, False)]
    entries = [entry(*pair) for pair in pairs]
    entries.append((eval_case(), searched([]), None, []))
    blocks, metrics = run_cases(entries)
    assert blocks[0]["lane_cross"] == {"structural_hit": True, "passage_hit": True}
    assert "lane_cross" not in blocks[-1]
    assert metrics["lanes.both"] == {"value": 0.2, "n": 5, "numerator": 1}
    assert metrics["lanes.neither"] == {"value": 0.4, "n": 5, "numerator": 2}
    assert metrics["lanes.structural_hit"]["numerator"] == 2
    assert metrics["lanes.passage_hit"]["numerator"] == 2


# --------------------------------------------------------------------------- aggregation §5.2


def test_zero_cases_still_give_every_catalog_metric() -> None:  # 51
    empty = SimpleNamespace(expected=pl.DataFrame(schema=EXPECTED_SCHEMA))
    scores = score_run(empty, build_tables([], "r0"))
    assert set(scores.metrics) == set(catalog.CATALOG_KEYS)
    assert list(scores.metrics) == sorted(scores.metrics)
    assert scores.metrics["latency.passage_ms"] == {
        "n": 0,
        "min": None,
        "p50": None,
        "p90": None,
        "p99": None,
        "max": None,
        "mean": None,
        "sum": None,
    }
    assert scores.metrics["passage.failure_rate"] == {"value": None, "n": 0, "numerator": None}
    assert scores.cases.schema == CASES
    assert scores.metrics_frame.height == 31


def test_smoke_run_metrics() -> None:  # 83 (the metric half)
    case = eval_case(
        query="青嶺",
        cues=["青嶺"],
        expected_sources=[{"source": "corpus/brewery.md", "relevance": 3}],
        expected_concepts=["青嶺酒造"],
        expected_associations=[{"subject": "青嶺酒造", "label": "醸造元", "object": "蔵元"}],
        expected_citations=[{"source": "corpus/brewery.md", "paragraph": 0, "quote": "青嶺酒造"}],
    )
    query = {
        "outcome": "queried",
        "total": 1,
        "matches": 1,
        "attributions": [{"source": "corpus/brewery.md", "paragraph": 0}],
        "latency_ms": 4,
    }
    structural = {"cues": [cue(["青嶺酒造"], latency=2)], "associations": [probe(query, latency=3)]}
    citation = {
        "source": "corpus/brewery.md",
        "paragraph": 0,
        "served": True,
        "outcome": "resolved",
        "section": {"check": "not_checked"},
        "quote": {"declared": "青嶺酒造", "matched": True},
        "latency_ms": 5,
    }
    blocks, metrics = run_cases(
        [(case, searched([hit("corpus/brewery.md")]), structural, [citation])]
    )
    block = blocks[0]
    assert block["recall"]["ndcg"] == 1.0 and block["missed"] == []
    assert block["coverage"]["concepts"]["value"] == 1.0
    assert block["coverage"]["associations"]["value"] == 1.0
    assert block["lane_cross"] == {"structural_hit": True, "passage_hit": True}
    assert metrics["recall.recall_at_k"]["n"] == 1
    assert metrics["lanes.both"] == {"value": 1.0, "n": 1, "numerator": 1}
    assert metrics["citations.recall"]["n"] == 1
    assert metrics["citations.resolved"]["numerator"] == 1
    assert metrics["citations.quote_match"] == {"value": 1.0, "n": 1, "numerator": 1}
    assert metrics["citations.section_match"]["n"] == 0
    # One cue (2 ms) and three positions (3 ms each).
    assert metrics["latency.resolve_ms"]["n"] == 4
    assert metrics["latency.resolve_ms"]["sum"] == 11.0
    assert metrics["latency.query_ms"]["sum"] == 4.0
    assert metrics["latency.citation_ms"]["max"] == 5.0
    assert metrics["diversity.sources"]["mean"] == 1.0
    assert metrics["structural.case_rate"] == {"value": 1.0, "n": 1, "numerator": 1}
    assert metrics["latency.evidence_ms"]["n"] == 0
    assert metrics["budget.omitted_rate"]["n"] == 0
    assert metrics["rerank.ran"]["n"] == 0


def test_unresolved_citation_codes() -> None:  # 87
    case = eval_case(
        expected_citations=[
            {"source": "corpus/does-not-exist.md", "paragraph": 0},
            {"source": "corpus/brewery.md", "paragraph": 99},
        ]
    )
    checks = [
        check(False, "unresolved", code="no_source", source="corpus/does-not-exist.md"),
        check(False, "unresolved", code="no_paragraph", paragraph=99),
    ]
    blocks, metrics = run_cases([(case, searched([]), None, checks)])
    assert blocks[0]["citations"]["validity"]["value"] == 0.0
    assert blocks[0]["citations"]["recall"]["value"] == 0.0
    assert metrics["citations.no_source"]["numerator"] == 1
    assert metrics["citations.no_paragraph"]["numerator"] == 1
    assert metrics["citations.resolved"] == {"value": 0.0, "n": 2, "numerator": 0}
    assert metrics["citations.other"]["numerator"] == 0


def test_failure_rate_and_diversity() -> None:
    blocks, metrics = run_cases(
        [
            (eval_case(), searched([hit("a.md"), hit("b.md"), hit("a.md", 1)]), None, []),
            (eval_case(), FAILED_PASSAGE, None, []),
            (eval_case(), searched([]), None, []),
        ]
    )
    assert [b.get("diversity_sources") for b in blocks] == [2, None, 0]
    assert metrics["passage.failure_rate"] == {"value": 1 / 3, "n": 3, "numerator": 1}
    assert metrics["diversity.sources"]["n"] == 2
    assert metrics["latency.passage_ms"]["n"] == 3


def test_errored_cue_latency_counts_and_names_do_not() -> None:
    structural = {
        "cues": [cue([], latency=9, error="boom"), cue(["x"], latency=1)],
        "associations": [],
    }
    _, metrics = run_cases([(eval_case(expected_concepts=["y"]), searched([]), structural, [])])
    assert metrics["latency.resolve_ms"]["n"] == 2
    assert metrics["latency.resolve_ms"]["max"] == 9.0


@pytest.mark.parametrize(
    ("n", "p50", "p90", "p99"),
    [(1, 1, 1, 1), (2, 1, 2, 2), (4, 2, 4, 4), (10, 5, 9, 10), (100, 50, 90, 99)],
)
def test_latency_percentiles_through_the_pipeline(n: int, p50: int, p90: int, p99: int) -> None:
    entries = [
        (eval_case(), {"outcome": "searched", "hits": [], "latency_ms": n - i}, None, [])
        for i in range(n)
    ]
    _, metrics = run_cases(entries)
    dist = metrics["latency.passage_ms"]
    assert (dist["n"], dist["p50"], dist["p90"], dist["p99"]) == (n, p50, p90, p99)
    assert dist["min"] == 1.0 and dist["max"] == float(n)
    assert dist["sum"] == float(n * (n + 1) // 2)

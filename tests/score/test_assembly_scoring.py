"""Budget and assembly scoring: §7.3's worked examples byte for byte, §5.2's
budget/rerank metrics and §7.5's console lines, from lane outputs (EVALUATE.md §9.3, §9.6)."""

from __future__ import annotations

import json
from typing import Any

from support.paths import WIRE

from taguru_eval.inputs.dataset import load_eval_text
from taguru_eval.inputs.prepare import PreparedRun
from taguru_eval.options import RunOptions, resolve_budget
from taguru_eval.run.lanes.budget import MeasuredHit, measure, passage_envelope, truncate
from taguru_eval.run.lanes.passage import apply_budget
from taguru_eval.score.aggregate import score_run
from taguru_eval.summary import summary_lines
from taguru_eval.tables import build_tables
from taguru_eval.tables.shapes import LaneOutput

# --------------------------------------------------------------------------- §7.3.6

DUP_ENVELOPE = (
    '{"candidate_id":"passage\\u0000dup-corpus\\u0000a.md\\u00000","kind":"passage",'
    '"fused_rank":1,"lane_ranks":[{"lane":"passage_bm25","rank":1}],"citation_refs":[],'
    '"passage":{"source":"a.md","paragraph":0,"score":0.54696476,'
    '"text":"the quick brown fox jumps over the lazy dog",'
    '"lanes":{"bm25":{"rank":1,"score":0.54696476}}}}'
)


def test_the_recorded_worked_example_byte_for_byte() -> None:
    hit = MeasuredHit(
        source="a.md",
        paragraph=0,
        score=0.54696476,
        text="the quick brown fox jumps over the lazy dog",
        lanes={"bm25": {"rank": 1, "score": 0.54696476}},
    )
    text = passage_envelope("dup-corpus", hit, 1)
    assert text == DUP_ENVELOPE
    assert measure(text) == (319, 319)
    alone = truncate("dup-corpus", [hit], 40, 65536, 4000)
    assert (alone.items_used, alone.bytes_used, alone.tokens_used) == (1, 323, 81)
    recorded = json.loads((WIRE / "evidence_duplicate_passage.json").read_text(encoding="utf-8"))
    budget = recorded["response"]["result"]["budget"]
    assert (budget["bytes_used"], budget["tokens_used"]) == (alone.bytes_used, alone.tokens_used)


def test_the_computed_worked_example_and_a_budget_that_skips_it() -> None:
    hit = MeasuredHit(
        source="corpus/brewery.md",
        paragraph=0,
        score=1.0,
        text="青嶺は青嶺酒造が造る銘柄です。",
        lanes={"bm25": {"rank": 1, "score": 1.0}},
    )
    text = passage_envelope("sake", hit, 1)
    assert '"score":1.0,' in text and text.count("\\u0000") == 3
    assert measure(text) == (327, 342)
    alone = truncate("sake", [hit], 40, 65536, 4000)
    assert (alone.bytes_used, alone.tokens_used) == (331, 87)
    kept, usage = apply_budget("sake", [hit], resolve_budget(None, None, 50))
    assert kept == []
    assert usage == {
        "items_used": 0,
        "bytes_used": 4,
        "tokens_used": 1,
        "limits": {"max_items": 40, "max_bytes": 65536, "max_tokens": 50},
        "omitted_total": 1,
    }


# --------------------------------------------------------------------------- §5.2 and §7.5

EVAL = "\n".join(
    [
        json.dumps({"taguru_eval": 1}),
        json.dumps({"case_id": "c1", "query": "q", "expected_sources": [{"source": "a.md"}]}),
    ]
)


def assembled(reranker: dict[str, Any], omitted: dict[str, int] | None = None) -> LaneOutput:
    """One assembled case: 3 items / 500 bytes / 100 tokens, one budget omission
    (unless ``omitted`` says otherwise), two distinct sources among its hits."""
    omitted = {"budget_exceeded": 1} if omitted is None else omitted
    hits = [
        {"source": source, "paragraph": paragraph, "score": 0.0, "lanes": {}}
        for source, paragraph in (("a.md", 0), ("b.md", 1), ("a.md", 2))
    ]
    return LaneOutput(
        case_index=0,
        case_id="c1",
        query="q",
        cues=[],
        limit=10,
        passage={"outcome": "searched", "hits": hits, "latency_ms": 4},
        checks=[],
        calls=[],
        evidence={
            "outcome": "assembled",
            "latency_ms": 4,
            "items": [],
            "omitted_by_reason": omitted,
            "selection": {
                "dedup_dropped": 0,
                "contradiction_groups": 0,
                "diversity_tier_width": 10,
            },
            "reranker": reranker,
        },
        budget={
            "items_used": 3,
            "bytes_used": 500,
            "tokens_used": 100,
            "limits": {"max_items": 40, "max_bytes": 65536, "max_tokens": 4000},
            "omitted_total": sum(omitted.values()),
        },
    )


def summary(output: LaneOutput, options: RunOptions) -> tuple[list[str], dict[str, Any]]:
    eval_set = load_eval_text(EVAL, "e.jsonl")
    tables = build_tables([output], "r")
    scores = score_run(eval_set, tables, rerank_requested=options.rerank is not None)
    prepared = PreparedRun(options, eval_set, None, "http://h:1", "http://h:1")
    doc = {"corpus": {"stable": True}}
    return summary_lines(prepared, doc, scores, tables), scores.metrics


def test_50_the_assembly_console_lines() -> None:
    options = RunOptions("e.jsonl", "ctx", assembly=True, rerank="model-x")
    ran = {"configured": True, "ran": True, "model": "model-x"}
    lines, metrics = summary(assembled(ran), options)
    assert lines[-3:] == [
        "  budget over 1 case(s): mean 3.0 item(s) / 500.0 byte(s) / 100.0 token(s) used, "
        "budget-omitted rate 0.250",
        "  diversity over 1 case(s): mean 2.0 distinct source(s) in admitted evidence",
        "  rerank 'model-x' over 1 attempted case(s): 1 ran, 0 degraded",
    ]
    assert metrics["budget.omitted_rate"] == {"value": 0.25, "n": 4, "numerator": 1}
    assert metrics["latency.evidence_ms"]["n"] == 1
    assert metrics["budget.tokens_used"]["mean"] == 100.0


def test_a_duplicate_passage_is_considered_but_not_a_budget_omission() -> None:
    options = RunOptions("e.jsonl", "ctx", assembly=True)
    omitted = {
        "budget_exceeded": 1,
        "contradiction_group_exceeds_budget": 2,
        "duplicate_passage": 4,
    }
    _, metrics = summary(assembled({"configured": False, "ran": False}, omitted), options)
    # budget-only omissions (1 + 2) over every considered candidate (7 omitted + 3 admitted)
    assert metrics["budget.omitted_rate"] == {"value": 0.3, "n": 10, "numerator": 3}


def test_49_a_configured_server_reranker_without_rerank_is_no_attempt() -> None:
    options = RunOptions("e.jsonl", "ctx", assembly=True)
    lines, metrics = summary(assembled({"configured": True, "ran": False}), options)
    assert metrics["rerank.ran"] == {"value": None, "n": 0, "numerator": None}
    assert not any(line.startswith("  rerank ") for line in lines)


def test_a_plain_run_without_samples_adds_no_line() -> None:
    failed = LaneOutput(
        case_index=0,
        case_id="c1",
        query="q",
        cues=[],
        limit=10,
        passage={"outcome": "failed", "message": "down", "latency_ms": 1},
        checks=[],
        calls=[],
    )
    lines, metrics = summary(failed, RunOptions("e.jsonl", "ctx"))
    # The target line, the case counts and the failed case (ERRATA row 20) only.
    assert lines[2:] == ["    passage failed — case 'c1': down"]
    assert metrics["diversity.sources"]["n"] == 0

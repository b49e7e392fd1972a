"""The per-case lanes: requests, extraction, classification, call records.

Shape and fault cases use ``httpx.MockTransport``; the end-to-end lane run
goes in-process through ``httpx.ASGITransport`` to the reference server
loaded with ``data/sake``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from support.paths import DATA
from support.vectors import vector_cases

from taguru_eval.corpus.paragraphs import split_paragraphs
from taguru_eval.inputs.dataset import (
    ABSENT,
    CaseOptions,
    EvalCase,
    ExpectedAssociation,
    ExpectedCitation,
    load_eval,
)
from taguru_eval.run.http import CallFailure, Reply, TaguruClient
from taguru_eval.run.lanes.case import run_case
from taguru_eval.run.lanes.passage import (
    NO_HITS_MESSAGE,
    _SearchPage,
    extract_served_hits,
    locator,
    search_body,
)
from taguru_eval.run.lanes.structural import Candidate, classify_position, top_tier
from taguru_eval.tables.shapes import HitLocator, LaneOutput, Plan
from taguru_refserver.app import create_app
from taguru_refserver.corpus import load_corpus_dir
from taguru_refserver.state import ServerState

BASE = "http://taguru.test"
Route = Callable[[str, dict[str, Any]], httpx.Response]


def ok(result: object) -> httpx.Response:
    return httpx.Response(200, json={"result": result, "status": "ok", "time": 0.0})


def err(status: int, code: str, message: str) -> httpx.Response:
    return httpx.Response(status, json={"status": "error", "code": code, "error": message})


class Recorder:
    """A MockTransport handler that answers by route and records every request."""

    def __init__(self, route: Route) -> None:
        self.route = route
        self.requests: list[tuple[str, dict[str, Any]]] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content) if request.content else {}
        path = request.url.path
        self.requests.append((path, body))
        return self.route(path, body)


async def run_with(route: Route, case: EvalCase) -> tuple[dict[str, Any], Recorder]:
    recorder = Recorder(route)
    async with TaguruClient(BASE, transport=httpx.MockTransport(recorder)) as client:
        output = await run_case(client, "sake", 0, case)
    return dict(output), recorder


def lexical(*names: str) -> list[dict[str, Any]]:
    return [{"name": n, "score": 1.0, "tier": "lexical", "kind": "exact"} for n in names]


PAGE = {
    "plan": {
        "contexts": [
            {
                "context": "sake",
                "lanes": {
                    "bm25": {"ran": True},
                    "vector": {"ran": False, "reason": "no embedding provider is configured"},
                },
                "filter": {"eligible_sources": 1, "total_sources": 5},
            }
        ]
    },
    "hits": [
        {
            "source": "a.md",
            "paragraph": 2,
            "score": 0.8630463480949402,
            "text": "secret body text",
            "lanes": {"bm25": {"rank": 1, "score": 0.8630463480949402}},
        }
    ],
}


# --------------------------------------------------------------------------- passage extraction


def extract_hits(payload: object) -> tuple[Plan | None, list[HitLocator]]:
    """(plan, hits as the artifact keeps them) from a search payload, read as the
    lane reads a reply the client parsed (its ``payload_as``, else the tolerant shape)."""
    client = TaguruClient("http://lanes.test", transport=httpx.MockTransport(httpx.Response))
    reply = Reply(payload=payload, status=200, latency_ms=0, url="http://lanes.test")
    try:
        page: object = client.payload_as(reply, _SearchPage, "search")
    except CallFailure:
        page = payload
    plan, hits = extract_served_hits(page)
    return plan, [locator(hit) for hit in hits]


def test_typed_page_keeps_plan_and_drops_text() -> None:
    plan, hits = extract_hits(PAGE)
    assert plan is not None
    assert plan["context"] == "sake"
    assert plan["lanes"]["vector"] == {
        "ran": False,
        "reason": "no embedding provider is configured",
    }
    assert plan["filter"] == {"eligible_sources": 1, "total_sources": 5}
    assert hits == [
        {
            "source": "a.md",
            "paragraph": 2,
            "score": pytest.approx(0.86304635, abs=1e-8),
            "lanes": {"bm25": {"rank": 1, "score": pytest.approx(0.86304635, abs=1e-8)}},
        }
    ]
    assert "text" not in hits[0]


def test_scores_are_binary32() -> None:
    _, hits = extract_hits(PAGE)
    import struct

    assert hits[0]["score"] == struct.unpack("<f", struct.pack("<f", 0.8630463480949402))[0]


def test_hits_without_text_fall_back_and_lose_the_plan() -> None:
    page = {"plan": PAGE["plan"], "hits": [{"source": "a.md", "paragraph": 1, "score": 2}]}
    plan, hits = extract_hits(page)
    assert plan is None
    assert hits == [{"source": "a.md", "paragraph": 1, "score": 2.0, "lanes": {}}]


@pytest.mark.parametrize("missing", [None, "absent"], ids=["null-lanes", "no-lanes-key"])
def test_one_hit_without_lanes_sends_the_whole_page_to_the_fallback(missing: str | None) -> None:
    """taguru's PassageHit requires ``lanes``: one hit without it fails the typed
    shape, so no plan is kept and no hit keeps its lane evidence (§3.4)."""
    second = {"source": "b.md", "paragraph": 0, "score": 0.5, "text": "t"}
    if missing is None:
        second["lanes"] = None
    page = {"plan": PAGE["plan"], "hits": [PAGE["hits"][0], second]}
    plan, hits = extract_hits(page)
    assert plan is None
    assert [hit["lanes"] for hit in hits] == [{}, {}]
    assert [hit["source"] for hit in hits] == ["a.md", "b.md"]
    assert hits[0]["score"] == pytest.approx(0.86304635, abs=1e-8)


def test_a_lane_inside_lanes_may_be_absent_or_null() -> None:
    hit = {"source": "a.md", "paragraph": 0, "score": 1, "text": "t"}
    page = {"plan": PAGE["plan"], "hits": [{**hit, "lanes": {"bm25": None}}]}
    plan, hits = extract_hits(page)
    assert plan is not None
    assert hits[0]["lanes"] == {}


def test_fallback_bare_array_defaults_and_wraps_paragraph() -> None:
    plan, hits = extract_hits([{"source": "a.md", "paragraph": 2**32 + 3}])
    assert plan is None
    assert hits == [{"source": "a.md", "paragraph": 3, "score": 0.0, "lanes": {}}]


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        ({"nothing": 1}, NO_HITS_MESSAGE),
        ("text", NO_HITS_MESSAGE),
        ([{"paragraph": 0}], "a hit is missing 'source'"),
        ([{"source": "a", "paragraph": -1}], "a hit is missing 'paragraph'"),
        ([{"source": "a", "paragraph": 1.0}], "a hit is missing 'paragraph'"),
        ([{"source": "a", "paragraph": True}], "a hit is missing 'paragraph'"),
    ],
)
def test_extraction_failures(payload: object, message: str) -> None:
    with pytest.raises(ValueError) as caught:
        extract_hits(payload)
    assert str(caught.value) == message


def test_search_body_sends_nulls_and_empty_tags() -> None:
    case = EvalCase(case_id="c", query="q", line=2)
    assert search_body(case) == {
        "limit": 10,
        "query": "q",
        "semantic_floor": None,
        "since": None,
        "tags": [],
        "until": None,
    }
    tagged = EvalCase(
        case_id="c", query="q", line=2, options=CaseOptions(limit=3, tags=("蔵",), since=5)
    )
    assert search_body(tagged)["tags"] == ["蔵"]
    assert search_body(tagged)["limit"] == 3
    assert search_body(tagged)["since"] == 5


async def test_passage_failure_is_recorded_truncated() -> None:
    def route(path: str, body: dict[str, Any]) -> httpx.Response:
        return err(500, "internal", "あ" * 200)

    output, _ = await run_with(route, EvalCase(case_id="c", query="q", line=2))
    passage = output["passage"]
    assert passage["outcome"] == "failed"
    assert passage["message"].endswith("…")
    assert len(passage["message"].encode()) <= 203
    assert list(passage) == ["outcome", "message", "latency_ms"]
    assert output["calls"][0]["outcome"] == "failed"
    assert output["calls"][0]["http_status"] == 500


async def test_extraction_failure_message_is_not_truncated() -> None:
    output, _ = await run_with(
        lambda p, b: ok({"nothing": True}), EvalCase(case_id="c", query="q", line=2)
    )
    assert output["passage"] == {
        "outcome": "failed",
        "message": NO_HITS_MESSAGE,
        "latency_ms": output["passage"]["latency_ms"],
    }


# --------------------------------------------------------------------------- structural lane


STRUCTURAL_CASE = EvalCase(
    case_id="s",
    query="the query",
    line=2,
    cues=("cue-a", "cue-b"),
    expected_concepts=("X",),
    expected_labels=("L",),
    expected_associations=(
        ExpectedAssociation("subj", "lab", "obj"),
        ExpectedAssociation("amb", "lab", "none"),
        ExpectedAssociation("subj", "broken", "obj"),
    ),
)


def structural_route(path: str, body: dict[str, Any]) -> httpx.Response:
    if path.endswith("/sources/search"):
        return ok(PAGE)
    if path.endswith("/query"):
        return ok(
            {
                "total": 1,
                "matches": [
                    {
                        "subject": "Subj",
                        "label": "Lab",
                        "object": "Obj",
                        "weight": 1.0,
                        "count": 2,
                        "attributions": [
                            {"source": "b.md", "weight": 1.0, "count": 1, "paragraph": 4},
                            {"source": "c.md", "weight": 1.0, "count": 1, "paragraph": None},
                        ],
                    }
                ],
                "plan": {"contexts": ["sake"]},
            }
        )
    cue = body["cue"]
    if cue == "broken":
        return ok({"not": "an array"})
    table = {
        "subj": lexical("Subj"),
        "lab": lexical("Lab"),
        "obj": lexical("Obj"),
        "amb": [*lexical("A1", "A2"), {"name": "S", "score": 0.9, "tier": "semantic"}],
        "none": [{"name": "S", "score": 0.9, "tier": "weird"}],
        "cue-a": [{"name": "Sem", "score": 0.7, "tier": "semantic"}],
        "cue-b": [],
    }
    return ok(table[cue])


async def test_structural_lane_order_and_outcomes() -> None:
    output, recorder = await run_with(structural_route, STRUCTURAL_CASE)
    paths = [(path.rsplit("/", 1)[-1], body.get("cue")) for path, body in recorder.requests]
    assert paths == [
        ("search", None),
        ("resolve", "cue-a"),
        ("resolve", "cue-b"),
        ("resolve_label", "cue-a"),
        ("resolve_label", "cue-b"),
        ("resolve", "subj"),
        ("resolve_label", "lab"),
        ("resolve", "obj"),
        ("query", None),
        ("resolve", "amb"),
        ("resolve_label", "lab"),
        ("resolve", "none"),
        ("resolve", "subj"),
        ("resolve_label", "broken"),
        ("resolve", "obj"),
    ]
    assert all(body["limit"] == 5 for path, body in recorder.requests if "resolve" in path)
    query_body = next(body for path, body in recorder.requests if path.endswith("/query"))
    assert query_body == {"label": "Lab", "limit": 1, "object": "Obj", "subject": "Subj"}

    structural = output["structural"]
    cues = structural["cues"]
    assert [(c["cue"], c["kind"]) for c in cues] == [
        ("cue-a", "concept"),
        ("cue-b", "concept"),
        ("cue-a", "label"),
        ("cue-b", "label"),
    ]
    assert cues[0]["resolved_names"] == ["Sem"]
    assert cues[0]["tier"] == "semantic"
    assert list(cues[0]) == ["cue", "kind", "resolved_names", "tier", "limit", "latency_ms"]
    assert "tier" not in cues[1] and cues[1]["resolved_names"] == []

    first, second, third = structural["associations"]
    assert first["subject"]["outcome"] == "resolved"
    assert list(first["subject"]) == ["outcome", "name", "tier", "latency_ms"]
    assert first["query"]["outcome"] == "queried"
    assert first["query"]["total"] == 1 and first["query"]["matches"] == 1
    assert first["query"]["attributions"] == [
        {"source": "b.md", "paragraph": 4},
        {"source": "c.md", "paragraph": None},
    ]
    assert second["subject"]["outcome"] == "ambiguous"
    assert second["subject"]["candidates"] == ["A1", "A2"]
    assert second["subject"]["tier"] == "lexical"
    assert second["object"]["outcome"] == "not_found"
    assert "query" not in second
    assert third["label"]["outcome"] == "errored"
    assert third["label"]["message"].startswith("resolve_label response did not parse: ")
    assert "query" not in third

    calls = output["calls"]
    assert [c["seq"] for c in calls] == list(range(len(calls)))
    assert [c["lane"] for c in calls[:5]] == ["passage", *["coverage"] * 4]
    assert calls[8]["position"] == "query" and calls[8]["outcome"] == "queried"
    assert calls[9]["position"] == "subject" and calls[9]["outcome"] == "ambiguous"
    assert calls[9]["item_index"] == 1
    assert calls[13]["endpoint"] == "POST /contexts/{name}/resolve_label"
    assert calls[13]["outcome"] == "errored" and calls[13]["error"] is not None


async def test_query_parse_failure_is_errored() -> None:
    def route(path: str, body: dict[str, Any]) -> httpx.Response:
        if path.endswith("/query"):
            return ok({"total": -1, "matches": []})
        return structural_route(path, body)

    case = EvalCase(
        case_id="q",
        query="q",
        line=2,
        expected_associations=(ExpectedAssociation("subj", "lab", "obj"),),
    )
    output, _ = await run_with(route, case)
    query = output["structural"]["associations"][0]["query"]
    assert query["outcome"] == "errored"
    assert query["message"] == (
        "query response did not parse: total: invalid value: integer `-1`, expected u64"
    )


async def test_transport_error_on_a_position() -> None:
    def route(path: str, body: dict[str, Any]) -> httpx.Response:
        if body.get("cue") == "obj":
            raise httpx.ConnectError("refused")
        return structural_route(path, body)

    case = EvalCase(
        case_id="t",
        query="q",
        line=2,
        expected_associations=(ExpectedAssociation("subj", "lab", "obj"),),
    )
    output, _ = await run_with(route, case)
    probe = output["structural"]["associations"][0]
    assert probe["object"] == {
        "outcome": "errored",
        "message": f"{BASE}/contexts/sake/resolve: refused",
        "latency_ms": probe["object"]["latency_ms"],
    }
    assert "query" not in probe


# --------------------------------------------------------------------------- citation lane


async def test_citation_outcomes() -> None:
    def route(path: str, body: dict[str, Any]) -> httpx.Response:
        if path.endswith("/sources/search"):
            return ok(PAGE)
        source, paragraph = body["source"], body["paragraph"]
        if source == "ghost":
            return err(404, "no_source", f"source '{source}' not found in context 'sake'")
        if paragraph == 99:
            return err(404, "no_paragraph", "paragraph 99 out of range")
        if source == "boom":
            return err(500, "internal", "kaput")
        if source == "bad":
            return ok({"source": "bad"})
        return ok(
            {"text": "Ｔｈｅ Quick fox", "source": source, "section": "由来", "locator": None}
        )

    case = EvalCase(
        case_id="c",
        query="q",
        line=2,
        expected_citations=(
            ExpectedCitation("a.md", 2, "由来", "the quick"),
            ExpectedCitation("a.md", 3, None),
            ExpectedCitation("a.md", 4, ABSENT, "slow"),
            ExpectedCitation("ghost", 0),
            ExpectedCitation("a.md", 99),
            ExpectedCitation("boom", 0),
            ExpectedCitation("bad", 0),
        ),
    )
    output, recorder = await run_with(route, case)
    checks = output["checks"]
    assert [(b["source"], b["paragraph"]) for p, b in recorder.requests[1:]] == [
        ("a.md", 2),
        ("a.md", 3),
        ("a.md", 4),
        ("ghost", 0),
        ("a.md", 99),
        ("boom", 0),
        ("bad", 0),
    ]
    first = checks[0]
    assert first == {
        "source": "a.md",
        "paragraph": 2,
        "served": True,
        "outcome": "resolved",
        "section": {"check": "matched", "expected": "由来"},
        "quote": {"declared": "the quick", "matched": True},
        "latency_ms": first["latency_ms"],
    }
    assert list(first) == [
        "source",
        "paragraph",
        "served",
        "outcome",
        "section",
        "quote",
        "latency_ms",
    ]
    assert checks[1]["served"] is False
    assert checks[1]["section"] == {"check": "mismatched", "expected": None}
    assert checks[2]["section"] == {"check": "not_checked"}
    assert checks[2]["quote"] == {"declared": "slow", "matched": False}
    assert checks[3]["outcome"] == "unresolved" and checks[3]["code"] == "no_source"
    assert list(checks[3]) == [
        "source",
        "paragraph",
        "served",
        "outcome",
        "code",
        "message",
        "latency_ms",
    ]
    assert checks[4]["code"] == "no_paragraph"
    assert checks[5]["code"] is None
    assert checks[5]["message"] == f"{BASE}/contexts/sake/citations answered 500: kaput"
    assert checks[6]["code"] is None
    assert checks[6]["message"].startswith("citation response did not parse: ")
    assert all("text" not in check for check in checks)
    assert [c["outcome"] for c in output["calls"][1:]] == [
        "resolved",
        "resolved",
        "resolved",
        "unresolved",
        "unresolved",
        "unresolved",
        "unresolved",
    ]


async def test_structural_attributions_count_as_served() -> None:
    def route(path: str, body: dict[str, Any]) -> httpx.Response:
        if path.endswith("/sources/search"):
            return err(503, "unhealthy", "down")
        if path.endswith("/citations"):
            return ok({"text": "t", "source": body["source"], "section": None})
        return structural_route(path, body)

    case = EvalCase(
        case_id="c",
        query="q",
        line=2,
        expected_associations=(ExpectedAssociation("subj", "lab", "obj"),),
        expected_citations=(ExpectedCitation("b.md", 4), ExpectedCitation("c.md", 0)),
    )
    output, _ = await run_with(route, case)
    assert output["passage"]["outcome"] == "failed"
    assert [check["served"] for check in output["checks"]] == [True, False]


# --------------------------------------------------------------------------- reference server


@pytest.fixture(scope="module")
def sake_app() -> Any:
    state = ServerState()
    load_corpus_dir(state, DATA)
    return create_app(state)


def corpus_paragraphs() -> list[str]:
    texts: list[str] = []
    for path in sorted((DATA / "sake").rglob("*.md")):
        text = path.read_text(encoding="utf-8")
        if text.startswith("---"):
            text = text.split("\n---", 1)[1].split("\n", 1)[1]
        texts.extend(p for p in split_paragraphs(text) if len(p) >= 12)
    return texts


async def test_lanes_against_the_reference_server(sake_app: Any) -> None:
    eval_set = load_eval(DATA / "sake" / "eval.jsonl")
    transport = httpx.ASGITransport(app=sake_app)
    async with TaguruClient(BASE, transport=transport) as client:
        outputs = [
            await run_case(client, "sake", index, case) for index, case in enumerate(eval_set.cases)
        ]
    first = outputs[0]
    assert first["case_id"] == "brand-origin-001"
    assert first["passage"]["outcome"] == "searched"
    assert first["passage"]["plan"]["lanes"]["vector"]["reason"] == (
        "no embedding provider is configured"
    )
    assert first["passage"]["hits"][0]["source"] == "corpus/brewery.md"
    probe = first["structural"]["associations"][0]
    assert probe["query"]["outcome"] == "queried" and probe["query"]["total"] == 1
    assert first["checks"][0]["outcome"] == "resolved"
    assert first["checks"][0]["quote"]["matched"] is True
    # Every call is recorded, and nothing the server served as text is kept.
    dumped = json.dumps(outputs, ensure_ascii=False)
    for paragraph in corpus_paragraphs():
        assert paragraph not in dumped
    total_calls = sum(len(o["calls"]) for o in outputs)
    assert total_calls >= len(outputs)


async def test_latency_excludes_the_wait_for_a_concurrency_slot() -> None:
    import asyncio

    from taguru_eval.run.runner import run_cases

    async def slow(request: httpx.Request) -> httpx.Response:
        await asyncio.sleep(0.03)
        return ok(PAGE)

    cases = [EvalCase(case_id=f"c{i}", query="q", line=i + 2) for i in range(6)]
    outputs: list[LaneOutput] = []
    async with TaguruClient(BASE, transport=httpx.MockTransport(slow)) as client:
        assert await run_cases(client, "sake", cases, 1, outputs.append) == len(cases)
    assert [o["case_id"] for o in outputs] == [c.case_id for c in cases]
    latencies = [o["passage"]["latency_ms"] for o in outputs]
    # The last case waited ~150 ms for its slot; only its own exchange is timed.
    assert all(25 <= latency < 120 for latency in latencies), latencies


# ------------------------------------------------------------ resolve.json: evaluate's side


@pytest.mark.parametrize("case", vector_cases("resolve", "top_tier"))
def test_top_tier_vectors(case: dict[str, Any]) -> None:
    expected = case["expected"]
    assert set(expected) <= {"names", "len"}, f"unknown expected keys {sorted(expected)}"
    candidates = [Candidate(c["name"], c["tier"]) for c in case["input"]["candidates"]]
    _, names = top_tier(candidates)
    if "names" in expected:
        assert names == expected["names"]
    if "len" in expected:
        assert len(names) == expected["len"]


@pytest.mark.parametrize("case", vector_cases("resolve", "classify_position"))
def test_classify_position_vectors(case: dict[str, Any]) -> None:
    expected = case["expected"]
    known = {"outcome", "name", "tier", "candidates", "latency_ms"}
    assert set(expected) <= known, f"unknown expected keys {sorted(set(expected) - known)}"
    group = [Candidate(c["name"], c["tier"]) for c in case["input"]["group"]]
    outcome = classify_position(*top_tier(group), case["input"]["latency_ms"])
    for key, value in expected.items():
        assert outcome[key] == value  # type: ignore[literal-required]

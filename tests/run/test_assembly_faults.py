"""Evidence answers a well-behaved server never gives, through a whole run (EVALUATE.md §3.7, §7.2).

The server is an ``httpx.MockTransport``: every route answers like taguru, the
evidence route answers what each test asks for. A package evaluate cannot use
fails the case's passage and evidence lanes with the spec's message; the run
still completes and writes a complete artifact (or, interrupted, nothing).
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import polars as pl
import pytest
from support.run import CONTEXT_ENTRY, evidence_package, ok, passage_item, write_eval

from taguru_eval.inputs.prepare import prepare_run
from taguru_eval.options import RunOptions
from taguru_eval.pipeline import execute
from taguru_eval.pipeline.finish import RunResult
from taguru_eval.run.console import Console

URL = "http://fake.test:9"
EVIDENCE_URL = f"{URL}/contexts/x/evidence"
DEFAULT_LIMITS = {"max_items": 40, "max_bytes": 65536, "max_tokens": 4000}

Answer = Callable[[dict[str, Any]], httpx.Response]


def package(request: dict[str, Any], items: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """A well-formed package for ``request``, honouring its budget."""
    items = [passage_item("a.md", 0, 1)] if items is None else items
    return evidence_package(items, request["budget"])


def fake_server(evidence: Answer, seen: list[dict[str, Any]]) -> httpx.MockTransport:
    def handler(request: httpx.Request) -> httpx.Response:
        path = request.url.path
        if path == "/health":
            return httpx.Response(200, json={"status": "ok", "version": "0.9.3"})
        if path.endswith("/evidence"):
            body: dict[str, Any] = json.loads(request.content)
            seen.append(body)
            return evidence(body)
        if path.endswith("/embeddings"):
            return ok({"provider_model": None})
        if path.endswith("/sources"):
            after = request.url.params.get("after")
            return ok({"total": 1, "sources": [] if after else ["a.md"], "entries": []})
        if path.endswith("/sources/search"):
            raise AssertionError("an --assembly run must not call sources/search")
        return ok(CONTEXT_ENTRY)

    return httpx.MockTransport(handler)


def assembly_run(
    tmp_path: Path, evidence: Answer, *, rerank: str | None = None
) -> tuple[RunResult, str, list[dict[str, Any]]]:
    case = {"case_id": "m", "query": "q", "expected_sources": [{"source": "a.md", "relevance": 1}]}
    eval_path = write_eval(tmp_path / "eval.jsonl", [case])
    options = RunOptions(
        eval_path=str(eval_path),
        context="x",
        url=URL,
        out=str(tmp_path / "evaluation.json"),
        assembly=True,
        rerank=rerank,
        store_dir=str(tmp_path / "runs"),
    )
    stdout = io.StringIO()
    seen: list[dict[str, Any]] = []
    prepared = prepare_run(options, {})
    result = execute(
        prepared, console=Console(stdout, io.StringIO()), transport=fake_server(evidence, seen)
    )
    return result, stdout.getvalue(), seen


def written(tmp_path: Path) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((tmp_path / "evaluation.json").read_text(encoding="utf-8"))
    return doc


def wrong_shape(request: dict[str, Any]) -> httpx.Response:
    return ok(package(request) | {"items": "x"})


def over_budget(request: dict[str, Any]) -> httpx.Response:
    answer = package(request, [passage_item("a.md", i, i + 1) for i in range(3)])
    answer["budget"]["tokens_used"] = request["budget"]["max_tokens"] + 1
    return ok(answer)


def other_limits(request: dict[str, Any]) -> httpx.Response:
    answer = package(request)
    answer["budget"]["limits"] = {"max_items": 40, "max_bytes": 65536, "max_tokens": 8000}
    return ok(answer)


def server_error(request: dict[str, Any]) -> httpx.Response:
    return httpx.Response(500, json={"status": "error", "code": "internal", "error": "boom"})


def long_error(request: dict[str, Any]) -> httpx.Response:
    return httpx.Response(503, json={"status": "error", "code": "overloaded", "error": "あ" * 300})


def not_an_envelope(request: dict[str, Any]) -> httpx.Response:
    return httpx.Response(200, text="<html>proxy</html>")


NO_PACKAGE = "response carries no recognizable evidence package ({})"


@pytest.mark.parametrize(
    ("answer", "message", "status"),
    [
        (
            wrong_shape,
            NO_PACKAGE.format("items: expected `array`, got `str`"),
            200,
        ),
        (
            over_budget,
            NO_PACKAGE.format("budget.tokens_used: 4001 exceeds budget.limits.max_tokens 4000"),
            200,
        ),
        (
            other_limits,
            NO_PACKAGE.format(
                "budget.limits: not the requested budget "
                "(max_items 40, max_bytes 65536, max_tokens 4000)"
            ),
            200,
        ),
        (server_error, f"{EVIDENCE_URL} answered 500: boom", 500),
        (
            long_error,
            f"{EVIDENCE_URL} answered 503: "
            + "あ" * ((200 - len(f"{EVIDENCE_URL} answered 503: ")) // 3)
            + "…",
            503,
        ),
        (not_an_envelope, f"{EVIDENCE_URL}: not a taguru response: <html>proxy</html>", 200),
    ],
    ids=["wrong-shape", "over-budget", "other-limits", "http-500", "truncated", "no-envelope"],
)
def test_an_unusable_answer_fails_the_case_and_the_run_completes(
    tmp_path: Path, answer: Answer, message: str, status: int
) -> None:
    result, stdout, _ = assembly_run(tmp_path, answer)
    assert result.exit_code == 0
    doc = written(tmp_path)
    assert doc == result.doc and len(doc["cases"]) == 1
    block = doc["cases"][0]
    latency = block["passage"]["latency_ms"]
    assert block["passage"] == {"outcome": "failed", "message": message, "latency_ms": latency}
    assert block["evidence"] == {"outcome": "failed", "message": message, "latency_ms": latency}
    for absent in ("budget", "diversity_sources", "recall"):
        assert absent not in block
    assert block["missed"] == []
    metrics = doc["metrics"]
    assert metrics["passage.failure_rate"] == {"value": 1.0, "n": 1, "numerator": 1}
    assert metrics["latency.evidence_ms"]["n"] == 1
    assert metrics["budget.items_used"]["n"] == 0
    assert "  1 case(s) — passage: 0 ok, 1 failed;" in stdout
    assert "secret body text" not in json.dumps(doc, ensure_ascii=False)
    calls = result.tables.calls
    assert calls.select("lane", "outcome", "http_status").rows() == [("evidence", "failed", status)]
    assert result.tables.evidence_items.height == 0
    assert result.store_path is not None
    assert pl.read_parquet(result.store_path / "evidence_items.parquet").height == 0


def test_an_unknown_item_kind_is_kept(tmp_path: Path) -> None:
    table = {
        "candidate_id": "table\u0000x\u0000t",
        "kind": "table",
        "fused_rank": 1,
        "lane_ranks": [{"lane": "table_lane", "rank": 1}],
        "citation_refs": [{"source": "a.md", "paragraph": 0}],
        "bytes": 10,
        "estimated_tokens": 3,
        "table": {"cells": ["secret body text"]},
    }

    def answer(request: dict[str, Any]) -> httpx.Response:
        return ok(package(request, [table, passage_item("b.md", 2, 2)]))

    result, _, _ = assembly_run(tmp_path, answer)
    block = written(tmp_path)["cases"][0]
    assert block["evidence"]["outcome"] == "assembled"
    assert block["evidence"]["items"][0] == {
        "candidate_id": "table\u0000x\u0000t",
        "kind": "table",
        "fused_rank": 1,
        "citation_refs": [{"source": "a.md", "paragraph": 0}],
    }
    assert [(h["source"], h["paragraph"]) for h in block["passage"]["hits"]] == [
        ("a.md", 0),
        ("b.md", 2),
    ]
    assert block["recall"]["recall_at_k"] == 1.0
    rows = result.tables.evidence_items
    assert rows.select("kind", "source").rows() == [("table", None), ("passage", "b.md")]


U64_MAX = 2**64 - 1
I64_MAX = 2**63 - 1


def test_taguru_sized_counts_are_exact_in_the_artifact_and_saturate_in_the_tables(
    tmp_path: Path,
) -> None:
    def answer(request: dict[str, Any]) -> httpx.Response:
        answer = package(request)
        item = answer["items"][0]
        del item["bytes"], item["estimated_tokens"]  # Option in taguru: may be left out
        item["fused_rank"] = U64_MAX
        item["lane_ranks"][0]["rank"] = U64_MAX
        answer["omitted_total"] = U64_MAX
        answer["omitted_by_reason"] = {
            "budget_exceeded": U64_MAX,
            "contradiction_group_exceeds_budget": U64_MAX,
        }
        return ok(answer)

    result, _, _ = assembly_run(tmp_path, answer)
    assert result.exit_code == 0
    block = written(tmp_path)["cases"][0]
    assert block["evidence"]["outcome"] == "assembled"
    assert block["budget"]["omitted_total"] == U64_MAX
    assert block["evidence"]["items"][0]["fused_rank"] == U64_MAX
    # int64 columns hold "at least I64_MAX", never a null that reads as "no budget".
    lanes = result.tables.case_lanes
    assert lanes.select("budget_omitted_total", "budget_omitted_by_budget").row(0) == (
        I64_MAX,
        I64_MAX,
    )
    items = result.tables.evidence_items
    assert items.select("fused_rank").item() == I64_MAX
    assert items["lane_ranks"][0][0]["rank"] == I64_MAX
    rate = written(tmp_path)["metrics"]["budget.omitted_rate"]
    assert rate["numerator"] == I64_MAX and rate["n"] == I64_MAX


@pytest.mark.parametrize(
    "reason", ["provider_error", "timeout", "circuit_open", "invalid_permutation"]
)
def test_a_failed_rerank_is_recorded_as_degraded(tmp_path: Path, reason: str) -> None:
    def answer(request: dict[str, Any]) -> httpx.Response:
        assert request["rerank"] == {"model": "m-1"}
        answer = package(request, [passage_item("a.md", 0, 1), passage_item("b.md", 0, 2)])
        answer["plan"]["reranker"] = {"configured": True, "ran": False, "reason": reason}
        return ok(answer)

    result, stdout, seen = assembly_run(tmp_path, answer, rerank="m-1")
    assert result.exit_code == 0
    doc = written(tmp_path)
    assert doc["inputs"]["rerank"] == "m-1"
    assert doc["cases"][0]["evidence"]["reranker"] == {
        "configured": True,
        "ran": False,
        "reason": reason,
    }
    assert doc["metrics"]["rerank.ran"] == {"value": 0.0, "n": 1, "numerator": 0}
    assert "  rerank 'm-1' over 1 attempted case(s): 0 ran, 1 degraded" in stdout.splitlines()
    assert seen[0]["budget"] == DEFAULT_LIMITS


def test_an_empty_pool_is_not_a_rerank_attempt(tmp_path: Path) -> None:
    def answer(request: dict[str, Any]) -> httpx.Response:
        answer = package(request)
        answer["plan"]["reranker"] = {"configured": True, "ran": False, "reason": "empty_pool"}
        return ok(answer)

    _, stdout, _ = assembly_run(tmp_path, answer, rerank="m-1")
    assert written(tmp_path)["metrics"]["rerank.ran"] == {"value": None, "n": 0, "numerator": None}
    assert "  rerank 'm-1' over 0 attempted case(s): 0 ran, 0 degraded" in stdout.splitlines()


def test_an_interrupted_assembly_run_writes_nothing(tmp_path: Path) -> None:
    def answer(request: dict[str, Any]) -> httpx.Response:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        assembly_run(tmp_path, answer)
    assert sorted(path.name for path in tmp_path.iterdir()) == ["eval.jsonl"]

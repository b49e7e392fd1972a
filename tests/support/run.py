"""Helpers shared by the run-mode tests: eval files, corpus folders, envelopes, evidence."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import httpx

CONTEXT_ENTRY: dict[str, Any] = {
    "name": "x",
    "description": "",
    "pinned": False,
    "loaded": True,
    "stats": {},
    "usage": {"last_write_epoch": 7},
    "revision": {"graph": 1, "passages": 2, "config": 0},
}
"""``GET /contexts/x`` of the mock servers: a directory entry at revision {1, 2, 0}."""

PLAN_LANES = ("resolve", "query", "activate", "passages", "communities", "citations")


def write_eval(path: Path, cases: list[dict[str, Any]], name: str = "fixture") -> Path:
    """An eval.jsonl with a header named ``name`` and one line per case."""
    lines = [json.dumps({"taguru_eval": 1, "name": name}, ensure_ascii=False)]
    lines.extend(json.dumps(case, ensure_ascii=False) for case in cases)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def write_files(root: Path, files: Mapping[str, str]) -> Path:
    """A corpus folder tree (relative path -> text) under ``root``."""
    for relative, text in files.items():
        target = root / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    return root


def strip_latency(value: Any) -> Any:
    """A document without its ``latency_ms`` keys and with every ``latency.*`` metric nulled."""
    if isinstance(value, dict):
        return {
            key: (None if key.startswith("latency.") else strip_latency(item))
            for key, item in value.items()
            if key != "latency_ms"
        }
    if isinstance(value, list):
        return [strip_latency(item) for item in value]
    return value


def ok(result: object) -> httpx.Response:
    """A taguru success envelope around ``result``."""
    return httpx.Response(200, json={"result": result, "status": "ok", "time": 0.0})


def passage_item(
    source: str, paragraph: int, rank: int, *, context: str = "x", text: str = "secret body text"
) -> dict[str, Any]:
    """An admitted passage ``EvidenceItem`` (HTTP.md §6.9)."""
    return {
        "candidate_id": f"passage\u0000{context}\u0000{source}\u0000{paragraph}",
        "kind": "passage",
        "fused_rank": rank,
        "lane_ranks": [{"lane": "passage_bm25", "rank": rank}],
        "citation_refs": [],
        "bytes": 120,
        "estimated_tokens": 30,
        "passage": {
            "source": source,
            "paragraph": paragraph,
            "score": 0.5,
            "text": text,
            "lanes": {"bm25": {"rank": rank, "score": 0.5}},
        },
    }


def evidence_package(
    items: list[dict[str, Any]], limits: Mapping[str, int] | None = None
) -> dict[str, Any]:
    """A well-formed ``EvidencePackage`` of ``items`` under ``limits`` (default 40/65536/4000)."""
    return {
        "items": items,
        "citations": [],
        "budget": {
            "items_used": len(items),
            "bytes_used": 4 + 120 * len(items),
            "tokens_used": 1 + 30 * len(items),
            "limits": dict(limits or {"max_items": 40, "max_bytes": 65536, "max_tokens": 4000}),
        },
        "omitted": [],
        "omitted_total": 0,
        "omitted_by_reason": {},
        "plan": {
            "lanes": {lane: {"ran": True} for lane in PLAN_LANES},
            "selection": {
                "dedup_dropped": 0,
                "contradiction_groups": 0,
                "diversity_tier_width": 10,
            },
            "reranker": {"configured": False, "ran": False},
        },
    }


def run_args(eval_path: str | Path, context: str, url: str, *more: str) -> list[str]:
    """The run-mode command line the end-to-end tests start from:
    ``--eval FILE --context NAME --url URL`` then ``more``."""
    return ["--eval", str(eval_path), "--context", context, "--url", url, *more]

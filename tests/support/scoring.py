"""Scoring hand-made cases through the production path (loader, tables, score, case block)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from taguru_eval.artifact.layout import case_block
from taguru_eval.artifact.read import calls_from_shapes
from taguru_eval.inputs.dataset import load_eval_text
from taguru_eval.score.aggregate import score_run
from taguru_eval.tables import build_tables
from taguru_eval.tables.shapes import LaneOutput

FAILED_PASSAGE: dict[str, Any] = {"outcome": "failed", "message": "boom", "latency_ms": 1}


def searched(hits: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    return {"outcome": "searched", "hits": list(hits), "latency_ms": 1}


def eval_case(**fields: Any) -> dict[str, Any]:
    """A loaded-case dict with every list present (the vectors' ``case`` shape)."""
    case: dict[str, Any] = {"case_id": "c1", "query": "q"}
    case.update(fields)
    return case


def run_cases(
    entries: Sequence[
        tuple[Mapping[str, Any], Mapping[str, Any], Mapping[str, Any] | None, list[Any]]
    ],
) -> tuple[list[dict[str, Any]], dict[str, dict[str, Any]]]:
    """Score ``(case, passage, structural, checks)`` entries; returns case blocks + metrics."""
    lines = [json.dumps({"taguru_eval": 1, "name": "vectors"}, ensure_ascii=False)]
    for index, (case, _, _, _) in enumerate(entries):
        line = dict(case)
        line["case_id"] = f"{case['case_id']}#{index}" if len(entries) > 1 else case["case_id"]
        lines.append(json.dumps(line, ensure_ascii=False))
    eval_set = load_eval_text("\n".join(lines) + "\n", "vectors.jsonl")
    outputs: list[LaneOutput] = []
    for index, ((_, passage, structural, checks), loaded) in enumerate(
        zip(entries, eval_set.cases, strict=True)
    ):
        output: dict[str, Any] = {
            "case_index": index,
            "case_id": loaded.case_id,
            "query": loaded.query,
            "cues": list(loaded.cues),
            "limit": loaded.effective_limit,
            "passage": dict(passage),
            "checks": list(checks),
        }
        if structural is not None:
            output["structural"] = dict(structural)
        output["calls"] = calls_from_shapes(output)
        outputs.append(output)  # type: ignore[arg-type]
    tables = build_tables(outputs, "vectors")
    scores = score_run(eval_set, tables)
    blocks = [
        case_block(output, row)
        for output, row in zip(outputs, scores.cases.to_dicts(), strict=True)
    ]
    for block in blocks:
        assert not _has_key(block, "text"), "a case block must never carry text"
    return blocks, scores.metrics


def _has_key(value: Any, key: str) -> bool:
    if isinstance(value, Mapping):
        return key in value or any(_has_key(item, key) for item in value.values())
    if isinstance(value, list):
        return any(_has_key(item, key) for item in value)
    return False


def score_one(
    case: Mapping[str, Any],
    passage: Mapping[str, Any],
    structural: Mapping[str, Any] | None,
    checks: list[Any],
) -> dict[str, Any]:
    blocks, _ = run_cases([(case, passage, structural, checks)])
    return blocks[0]

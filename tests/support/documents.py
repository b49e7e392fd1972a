"""Build evaluation.json documents shaped as taguru's own ``evaluate`` writes them.

Used by the analyst-surface tests (ingest, report, charts, notebooks). The
documents follow EVALUATE.md §6 field for field — and, like taguru's, carry no
``inputs.concurrency``. Each case's numbers are derived from a small spec so a
test can state what the artifact says and check what the store gives back.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import polars as pl

from taguru_eval import catalog
from taguru_eval.gate import GateReport, evaluate_gate
from taguru_eval.inputs.thresholds import Thresholds
from taguru_eval.score.stats import distribution, ratio
from taguru_eval.tables import metrics_frame

CASE_IDS = ("alpha-001", "beta-002", "gamma-003", "delta-004")


def _hit(source: str, paragraph: int, rank: int) -> dict[str, Any]:
    score = round(5.0 - rank * 0.75, 4)
    return {
        "source": source,
        "paragraph": paragraph,
        "score": score,
        "lanes": {"bm25": {"rank": rank + 1, "score": score}},
    }


def case_block(case_id: str, index: int, step: int) -> dict[str, Any]:
    """One case block; ``step`` moves its metrics (a later run of a drifting corpus)."""
    matched = 2 if (index + step) % 3 else 1
    expected_total = 2
    rank_first = (index + step) % 3
    mrr = 1.0 / (rank_first + 1)
    recall = matched / expected_total
    ndcg = round(0.5 + 0.1 * ((index * 7 + step * 3) % 5), 6)
    hits = [_hit(f"corpus/doc{(index + k) % 3}.md", k, k) for k in range(3)]
    latency = 10 + index * 3 + step
    block: dict[str, Any] = {
        "case_id": case_id,
        "query": f"question {index}",
        "cues": [f"cue-{index}"],
        "limit": 5,
        "passage": {
            "outcome": "searched",
            "plan": {
                "context": "demo",
                "lanes": {
                    "bm25": {"ran": True},
                    "vector": {"ran": False, "reason": "no embedding provider is configured"},
                },
            },
            "hits": hits,
            "latency_ms": latency,
        },
        "structural": {
            "cues": [
                {
                    "cue": f"cue-{index}",
                    "kind": "concept",
                    "resolved_names": [f"Entity {index}"],
                    "tier": "exact",
                    "limit": 5,
                    "latency_ms": 2 + index,
                }
            ],
            "associations": [
                {
                    "subject_cue": f"Entity {index}",
                    "label_cue": "knows",
                    "object_cue": "Other",
                    "subject": {
                        "outcome": "resolved",
                        "name": f"Entity {index}",
                        "tier": "exact",
                        "latency_ms": 1,
                    },
                    "label": {
                        "outcome": "resolved",
                        "name": "knows",
                        "tier": "exact",
                        "latency_ms": 1,
                    },
                    "object": {"outcome": "not_found", "latency_ms": 2},
                }
            ],
        },
        "recall": {
            "recall_at_k": recall,
            "mrr": mrr,
            "ndcg": ndcg,
            "expected_total": expected_total,
            "matched": matched,
        },
        "coverage": {
            "concepts": {"expected": 1, "matched": 1, "value": 1.0},
            "associations": {"expected": 1, "matched": 0, "value": 0.0},
        },
        "lane_cross": {"structural_hit": True, "passage_hit": True},
        "missed": [
            "expected_associations: (Entity, knows, Other) query never ran (a position did not pin)"
        ],
        "missed_truncated": 0,
        "diversity_sources": 3,
    }
    if index % 2 == 0:
        valid = 1 if step % 2 == 0 else 0
        block["citations"] = {
            "recall": {"expected_total": 1, "matched": 1, "value": 1.0},
            "validity": {"expected_total": 1, "valid": valid, "value": float(valid)},
            "checks": [
                {
                    "source": "corpus/doc0.md",
                    "paragraph": 0,
                    "served": True,
                    "outcome": "resolved",
                    "section": {"check": "matched" if valid else "mismatched", "expected": "Intro"},
                    "quote": {"declared": "a quote", "matched": True},
                    "latency_ms": 4,
                }
            ],
        }
        if not valid:
            block["missed"].append(
                "expected_citations: (corpus/doc0.md, 0) failed locator validity"
            )
    return block


def evaluation_document(
    *,
    step: int = 0,
    context: str = "demo",
    generated_at: str = "2026-07-28T10:05:12Z",
    case_ids: Sequence[str] = CASE_IDS,
    revision: tuple[int, int, int] = (10, 7, 0),
    thresholds: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A whole evaluation.json object (taguru's shape: no ``inputs.concurrency``)."""
    cases = [case_block(case_id, i, step) for i, case_id in enumerate(case_ids)]
    graph, passages, config = revision
    rev = {"graph": graph, "passages": passages, "config": config}
    definitions = catalog.definitions()
    metrics: dict[str, Any] = {}
    for name, definition in definitions.items():
        metrics[name] = (
            distribution([]) if definition["statistic"] == "distribution" else ratio(0, 0)
        )

    def values(path: Sequence[str]) -> list[float]:
        out: list[float] = []
        for case in cases:
            current: Any = case
            for key in path:
                current = current.get(key) if isinstance(current, dict) else None
            if current is not None:
                out.append(float(current))
        return out

    metrics["recall.recall_at_k"] = distribution(values(["recall", "recall_at_k"]))
    metrics["recall.mrr"] = distribution(values(["recall", "mrr"]))
    metrics["recall.ndcg"] = distribution(values(["recall", "ndcg"]))
    metrics["coverage.concepts"] = distribution(values(["coverage", "concepts", "value"]))
    metrics["coverage.associations"] = distribution(values(["coverage", "associations", "value"]))
    metrics["citations.recall"] = distribution(values(["citations", "recall", "value"]))
    metrics["citations.locator_validity"] = distribution(values(["citations", "validity", "value"]))
    metrics["latency.passage_ms"] = distribution(values(["passage", "latency_ms"]))
    metrics["diversity.sources"] = distribution(values(["diversity_sources"]))
    metrics["passage.failure_rate"] = ratio(0, len(cases))
    metrics["structural.case_rate"] = ratio(len(cases), len(cases))
    return {
        "taguru_evaluation": 1,
        "generated_at": generated_at,
        "matching": {
            "normalization": "taguru::context::normalize_entry",
            "normalized": ["expected_concepts", "expected_labels"],
            "sources": "exact (source, paragraph) match — no normalization",
        },
        "inputs": {
            "eval": {"path": "eval.jsonl", "name": "demo set", "cases": len(cases)},
            "context": context,
            "url": "http://127.0.0.1:8248",
            "out": "evaluation.json",
            "default_limit": 10,
            "resolve_limit": 5,
            "mode": "baseline",
        },
        "corpus": {
            "revision_before": rev,
            "revision_after": rev,
            "stable": True,
            "last_write_epoch_before": 1700000000,
            "last_write_epoch_after": 1700000000,
            "embeddings": {"provider_model": None},
            "sources_count": 3,
        },
        "thresholds": thresholds,
        "definitions": definitions,
        "cases": cases,
        "metrics": dict(sorted(metrics.items())),
    }


def abstention_block() -> dict[str, Any]:
    """A small ABSTENTION.md §3.8 block: one abstained, one surfaced must-refuse case."""
    passage = {
        "outcome": "searched",
        "verdict": "abstained",
        "limit": 10,
        "vector_ran": True,
        "floor": 0.35,
        "hits_served": 2,
        "vector_hits": 0,
        "bm25_only_hits": 2,
        "top": [],
        "top_truncated": 2,
        "latency_ms": 3,
    }
    return {
        "rule": "semantic",
        "claim": "within each probe's served window, nothing cleared the bar the server applied",
        "vector": {
            "provider_model": "m",
            "passage_vectors": "ready",
            "effective_floors": [0.35],
            "floors_coherent": True,
        },
        "counts": {"abstained": 1, "surfaced": 1, "undetermined": 0, "failed": 0},
        "cases": [
            {
                "case_id": "mr-a",
                "kind": "out_of_corpus",
                "query": "q",
                "verdict": "abstained",
                "passage": passage,
            },
            {
                "case_id": "mr-b",
                "kind": "adjacent",
                "query": "q",
                "verdict": "surfaced",
                "reason": "structural_candidate",
                "passage": passage,
                "structural": {
                    "verdict": "surfaced",
                    "reason": "structural_candidate",
                    "cues": [
                        {
                            "cue": "c",
                            "candidates": [{"name": "N", "tier": "lexical"}],
                            "candidates_truncated": 0,
                            "latency_ms": 2,
                        }
                    ],
                },
            },
        ],
        "warnings": [],
    }


def write_document(path: Path, document: dict[str, Any]) -> Path:
    """Write ``document`` as taguru does (2-space indented JSON, UTF-8)."""
    path.write_text(json.dumps(document, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")
    return path


def history_documents(runs: int, context: str = "demo") -> list[dict[str, Any]]:
    """``runs`` documents of one context whose metrics and revision move each run."""
    documents = []
    for step in range(runs):
        documents.append(
            evaluation_document(
                step=step,
                context=context,
                generated_at=f"2026-07-28T10:{step:02d}:00Z",
                revision=(10 + (step + 1) // 2, 7 + step // 2, 0),
            )
        )
    return documents


def gate_on_values(
    thresholds: Thresholds,
    metrics: Mapping[str, Any],
    case_values: pl.DataFrame,
    *,
    metric_statistics: Mapping[str, str] | None = None,
    **options: Any,
) -> GateReport:
    """The gate over an evaluation.json ``metrics`` map (as the vectors state them).

    A value that is not an object has no row in the metrics table, exactly as
    the scalar of such a value is absent.
    """
    objects = {name: value for name, value in metrics.items() if isinstance(value, Mapping)}
    frame = metrics_frame(objects, "run", metric_statistics)
    return evaluate_gate(thresholds, frame, case_values, **options)


def with_stability(
    document: dict[str, Any], unstable: Mapping[str, Sequence[str]], repeats: int = 3
) -> dict[str, Any]:
    """``document`` as a ``run --repeat`` writes it: ``inputs.repeat``, every case's
    ``stability`` block (the cases named in ``unstable`` with those metrics differing),
    the ``stability.unstable_rate`` definition and value."""
    repeated = json.loads(json.dumps(document))
    repeated["inputs"]["repeat"] = repeats
    for case in repeated["cases"]:
        differs = list(unstable.get(case["case_id"], ()))
        case["stability"] = {"repeats": repeats, "unstable": bool(differs), "differs": differs}
    extended = catalog.catalog_for(must_refuse=False, answers=False, stability=True)
    repeated["definitions"] = extended.definitions()
    metrics = dict(repeated["metrics"])
    metrics[catalog.UNSTABLE_RATE] = ratio(len(unstable), len(repeated["cases"]))
    repeated["metrics"] = dict(sorted(metrics.items()))
    return repeated

"""evaluation.json (EVALUATE.md §6): build the document, serialise it, write it atomically.

The artifact only serialises: per-case metrics come from the scorer's
``cases`` frame, aggregates from its metrics map, and the lane blocks
(passage, structural, citation checks, evidence, budget) are copied from the
lane outputs through *canonicalisers* that emit the spec's keys in the spec's
order and nothing else — so a stray ``text`` key can never reach the file.

Binary32 values (hit and lane scores, plan floors) are wrapped in :class:`F32`
and printed from their binary32 value (``0.86304635``); other floats use
Python's shortest round-trip ``repr``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from taguru_eval import catalog
from taguru_eval._base.files import write_bytes_atomic
from taguru_eval._base.text import F32, dumps_json, encode_json
from taguru_eval.errors import RunError
from taguru_eval.score.aggregate import Scores
from taguru_eval.tables.shapes import LaneOutput

STAMP = 1

DEFAULT_LIMIT = 10

RESOLVE_LIMIT = 5

MATCHING: dict[str, Any] = {
    "normalization": "taguru::context::normalize_entry",
    "normalized": ["expected_concepts", "expected_labels"],
    "sources": "exact (source, paragraph) match — no normalization",
}


def dumps(doc: Any) -> str:
    """evaluation.json's text: serde_json's pretty layout with 2-space indent."""
    return dumps_json(doc, indent=2)


def write_json_atomic(path: str | Path, doc: Any) -> None:
    """Serialise ``doc`` fully, then write it via a temp file + rename (EVALUATE.md §3.9).

    Serialisation happens before any file is created, and a failed write
    removes its temp file, so a failure (or Ctrl-C) never leaves a partial
    file behind. Failure -> :class:`RunError` ``writing {path}: {error}``.
    The bytes are :func:`dumps`'s text in UTF-8, encoded without the text.
    """
    target = Path(path)
    try:
        payload = encode_json(doc, indent=2)
    except (TypeError, ValueError) as exc:
        raise RunError(f"writing {path}: {exc}") from None
    try:
        write_bytes_atomic(target, payload)
    except OSError as exc:
        raise RunError(f"writing {path}: {exc.strerror or exc}") from None


def _lane_score(value: Mapping[str, Any]) -> dict[str, Any]:
    return {"rank": value["rank"], "score": F32(value["score"])}


def _hit(hit: Mapping[str, Any]) -> dict[str, Any]:
    lanes = hit.get("lanes") or {}
    return {
        "source": hit["source"],
        "paragraph": hit["paragraph"],
        "score": F32(hit.get("score", 0.0)),
        "lanes": {lane: _lane_score(lanes[lane]) for lane in ("bm25", "vector") if lane in lanes},
    }


def _lane_plan(plan: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"ran": plan["ran"]}
    if plan.get("reason") is not None:
        out["reason"] = plan["reason"]
    if plan.get("floor") is not None:
        out["floor"] = F32(plan["floor"])
    return out


def _plan(plan: Mapping[str, Any]) -> dict[str, Any]:
    lanes = plan["lanes"]
    out: dict[str, Any] = {
        "context": plan["context"],
        "lanes": {"bm25": _lane_plan(lanes["bm25"]), "vector": _lane_plan(lanes["vector"])},
    }
    if plan.get("filter") is not None:
        flt = plan["filter"]
        out["filter"] = {
            "eligible_sources": flt["eligible_sources"],
            "total_sources": flt["total_sources"],
        }
    return out


def passage_block(passage: Mapping[str, Any]) -> dict[str, Any]:
    """``{outcome: searched, plan?, hits, latency_ms}`` or ``{outcome: failed, message, ...}``."""
    if passage["outcome"] == "searched":
        out: dict[str, Any] = {"outcome": "searched"}
        if passage.get("plan") is not None:
            out["plan"] = _plan(passage["plan"])
        out["hits"] = [_hit(hit) for hit in passage.get("hits") or []]
        out["latency_ms"] = passage["latency_ms"]
        return out
    return {
        "outcome": passage["outcome"],
        "message": passage.get("message", ""),
        "latency_ms": passage["latency_ms"],
    }


def _cue(cue: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {
        "cue": cue["cue"],
        "kind": cue["kind"],
        "resolved_names": list(cue.get("resolved_names") or []),
    }
    if cue.get("tier") is not None:
        out["tier"] = cue["tier"]
    out["limit"] = cue.get("limit", RESOLVE_LIMIT)
    out["latency_ms"] = cue["latency_ms"]
    if cue.get("error") is not None:
        out["error"] = cue["error"]
    return out


_POSITION_KEYS = {
    "not_found": (),
    "resolved": ("name", "tier"),
    "ambiguous": ("tier", "candidates"),
    "errored": ("message",),
}


def _position(position: Mapping[str, Any]) -> dict[str, Any]:
    outcome = position["outcome"]
    out: dict[str, Any] = {"outcome": outcome}
    for key in _POSITION_KEYS.get(outcome, ("name", "tier", "candidates", "message")):
        if key in position and position[key] is not None:
            out[key] = list(position[key]) if key == "candidates" else position[key]
    out["latency_ms"] = position["latency_ms"]
    return out


def _query(query: Mapping[str, Any]) -> dict[str, Any]:
    if query["outcome"] == "queried":
        out: dict[str, Any] = {
            "outcome": "queried",
            "total": query["total"],
            "matches": query["matches"],
        }
        attributions = query.get("attributions") or []
        if attributions:
            out["attributions"] = [
                {"source": item["source"], "paragraph": item.get("paragraph")}
                for item in attributions
            ]
        out["latency_ms"] = query["latency_ms"]
        return out
    return {
        "outcome": query["outcome"],
        "message": query.get("message", ""),
        "latency_ms": query["latency_ms"],
    }


def _probe(probe: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {
        "subject_cue": probe["subject_cue"],
        "label_cue": probe["label_cue"],
        "object_cue": probe["object_cue"],
        "subject": _position(probe["subject"]),
        "label": _position(probe["label"]),
        "object": _position(probe["object"]),
    }
    if probe.get("query") is not None:
        out["query"] = _query(probe["query"])
    return out


def structural_block(structural: Mapping[str, Any]) -> dict[str, Any]:
    """``{cues: [CueResolution], associations: [AssociationProbe]}``."""
    return {
        "cues": [_cue(cue) for cue in structural.get("cues") or []],
        "associations": [_probe(probe) for probe in structural.get("associations") or []],
    }


def citation_check_block(check: Mapping[str, Any]) -> dict[str, Any]:
    """A CitationCheck with its outcome fields inlined, never any text."""
    out: dict[str, Any] = {
        "source": check["source"],
        "paragraph": check["paragraph"],
        "served": check["served"],
        "outcome": check["outcome"],
    }
    if check["outcome"] == "resolved":
        section = check.get("section") or {"check": "not_checked"}
        out["section"] = (
            {"check": section["check"]}
            if section["check"] == "not_checked"
            else {"check": section["check"], "expected": section.get("expected")}
        )
        if check.get("quote") is not None:
            quote = check["quote"]
            out["quote"] = {"declared": quote["declared"], "matched": quote["matched"]}
    else:
        out["code"] = check.get("code")
        out["message"] = check.get("message", "")
    out["latency_ms"] = check["latency_ms"]
    return out


def budget_block(budget: Mapping[str, Any]) -> dict[str, Any]:
    limits = budget["limits"]
    return {
        "items_used": budget["items_used"],
        "bytes_used": budget["bytes_used"],
        "tokens_used": budget["tokens_used"],
        "limits": {
            "max_items": limits["max_items"],
            "max_bytes": limits["max_bytes"],
            "max_tokens": limits["max_tokens"],
        },
        "omitted_total": budget["omitted_total"],
    }


def _ratio_block(expected: int, matched: int, value: float, matched_key: str) -> dict[str, Any]:
    return {"expected_total": expected, matched_key: matched, "value": value}


def case_block(lane_output: Mapping[str, Any], row: Mapping[str, Any]) -> dict[str, Any]:
    """One ``cases[]`` entry (§6.6) from a lane output and its row of the cases frame."""
    block: dict[str, Any] = {"case_id": lane_output["case_id"], "query": lane_output["query"]}
    cues = list(lane_output.get("cues") or [])
    if cues:
        block["cues"] = cues
    block["limit"] = lane_output["limit"]
    block["passage"] = passage_block(lane_output["passage"])
    if lane_output.get("structural") is not None:
        block["structural"] = structural_block(lane_output["structural"])
    if row["recall_expected_total"] is not None:
        block["recall"] = {
            "recall_at_k": row["recall_at_k"],
            "mrr": row["mrr"],
            "ndcg": row["ndcg"],
            "expected_total": row["recall_expected_total"],
            "matched": row["recall_matched"],
        }
    coverage = {
        name: {
            "expected": row[f"coverage_{name}_expected"],
            "matched": row[f"coverage_{name}_matched"],
            "value": row[f"coverage_{name}"],
        }
        for name in ("concepts", "labels", "associations")
        if row[f"coverage_{name}_expected"] is not None
    }
    if coverage:
        block["coverage"] = coverage
    if row["lane_cross_structural_hit"] is not None:
        block["lane_cross"] = {
            "structural_hit": row["lane_cross_structural_hit"],
            "passage_hit": row["lane_cross_passage_hit"],
        }
    if row["citations_expected_total"] is not None:
        block["citations"] = {
            "recall": _ratio_block(
                row["citations_expected_total"],
                row["citations_matched"],
                row["citations_recall"],
                "matched",
            ),
            "validity": _ratio_block(
                row["citations_expected_total"],
                row["citations_valid"],
                row["citations_locator_validity"],
                "valid",
            ),
            "checks": [citation_check_block(check) for check in lane_output.get("checks") or []],
        }
    block["missed"] = list(row["missed"] or [])
    block["missed_truncated"] = row["missed_truncated"]
    if lane_output.get("evidence") is not None:
        block["evidence"] = dict(lane_output["evidence"])
    if lane_output.get("budget") is not None:
        block["budget"] = budget_block(lane_output["budget"])
    if row["diversity_sources"] is not None:
        block["diversity_sources"] = row["diversity_sources"]
    return block


@dataclass(frozen=True)
class RunContext:
    """The run-level facts the artifact records besides cases and metrics (§6.3, §6.4).

    ``url`` must already be masked (scheme://host:port). ``embeddings_read``
    False omits ``corpus.embeddings`` (the GET failed); True writes
    ``{provider_model}`` (null = the server has no provider).
    """

    eval_path: str
    eval_name: str | None
    context: str
    url: str
    out: str
    generated_at: str
    revision_before: Mapping[str, int]
    revision_after: Mapping[str, int]
    last_write_epoch_before: int
    last_write_epoch_after: int
    sources_count: int
    embeddings_read: bool = True
    provider_model: str | None = None
    mode: str = "baseline"
    budget: Mapping[str, int] | None = None
    rerank: str | None = None
    concurrency: int = 8
    must_refuse: Mapping[str, Any] | None = None
    thresholds: Mapping[str, Any] | None = None
    warnings: Sequence[str] = field(default_factory=tuple)


def _revision(revision: Mapping[str, int]) -> dict[str, int]:
    return {key: revision[key] for key in ("graph", "passages", "config")}


def inputs_block(context: RunContext, case_count: int) -> dict[str, Any]:
    inputs: dict[str, Any] = {
        "eval": {"path": context.eval_path, "name": context.eval_name, "cases": case_count},
        "context": context.context,
        "url": context.url,
        "out": context.out,
        "default_limit": DEFAULT_LIMIT,
        "resolve_limit": RESOLVE_LIMIT,
        "mode": context.mode,
    }
    if context.budget is not None:
        inputs["budget"] = {
            key: context.budget[key] for key in ("max_items", "max_bytes", "max_tokens")
        }
    if context.rerank is not None:
        inputs["rerank"] = context.rerank
    inputs["concurrency"] = context.concurrency
    if context.must_refuse is not None:
        inputs["must_refuse"] = dict(context.must_refuse)
    return inputs


def corpus_block(context: RunContext) -> dict[str, Any]:
    before = _revision(context.revision_before)
    after = _revision(context.revision_after)
    corpus: dict[str, Any] = {
        "revision_before": before,
        "revision_after": after,
        "stable": before == after,
        "last_write_epoch_before": context.last_write_epoch_before,
        "last_write_epoch_after": context.last_write_epoch_after,
    }
    if context.embeddings_read:
        corpus["embeddings"] = {"provider_model": context.provider_model}
    corpus["sources_count"] = context.sources_count
    return corpus


def build_artifact(
    context: RunContext,
    lane_outputs: Sequence[LaneOutput],
    scores: Scores,
    *,
    extra_definitions: Mapping[str, catalog.MetricDefinition] | None = None,
    extra_metrics: Mapping[str, Mapping[str, Any]] | None = None,
    case_extras: Mapping[str, Mapping[str, Any]] | None = None,
    extra_top_level: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The whole evaluation.json document, keys in §6.1 order.

    The ``extra_*``/``case_extras`` hooks carry additive blocks (e.g.
    ABSTENTION.md §3.8 with ``--must-refuse``): extra definitions/metrics are
    merged into the sorted maps, ``case_extras[case_id]`` keys are appended to
    that case's block, and ``extra_top_level`` keys come after ``metrics``.
    """
    ordered = sorted(lane_outputs, key=lambda output: output["case_index"])
    rows = scores.cases.sort("case_index").to_dicts()
    if len(rows) != len(ordered):
        raise ValueError("the cases frame and the lane outputs disagree on the case count")
    metrics = dict(scores.metrics)
    metrics.update({name: dict(value) for name, value in (extra_metrics or {}).items()})
    doc: dict[str, Any] = {
        "taguru_evaluation": STAMP,
        "generated_at": context.generated_at,
        "matching": {
            "normalization": MATCHING["normalization"],
            "normalized": list(MATCHING["normalized"]),
            "sources": MATCHING["sources"],
        },
        "inputs": inputs_block(context, len(ordered)),
        "corpus": corpus_block(context),
        "thresholds": None if context.thresholds is None else dict(context.thresholds),
        "definitions": catalog.definitions(extra_definitions),
    }
    if context.warnings:
        doc["warnings"] = list(context.warnings)
    cases = [case_block(output, row) for output, row in zip(ordered, rows, strict=True)]
    for block in cases:
        block.update((case_extras or {}).get(block["case_id"], {}))
    doc["cases"] = cases
    doc["metrics"] = {name: metrics[name] for name in sorted(metrics)}
    doc.update(extra_top_level or {})
    return doc

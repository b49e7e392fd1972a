"""The lane blocks of a case block, canonicalised (EVALUATE.md §6.7).

Each canonicaliser copies a lane output's block and emits the spec's keys in
the spec's order and nothing else, so a stray ``text`` key can never reach
the file. That order is the shape's declaration order
(:mod:`taguru_eval.tables.shapes`): the key lists a canonicaliser loops over
derive from it, and the keys it spells out (a loop would cost, writing
hundreds of thousands of hits) are held to it by ``tests/artifact/test_blocks.py``.
Binary32 values (hit and lane scores, plan floors) are wrapped in
:class:`F32` and printed from their binary32 value (``0.86304635``); given a
list, :func:`passage_block` appends them to it instead and writes the
placeholder :func:`~taguru_eval._base.text.encode_json_each` spells them into
(a million F32 objects cost more than writing their values).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final

from taguru_eval._base.text import F32, binary32_slot
from taguru_eval.contract import RESOLVE_LIMIT
from taguru_eval.tables.derive import keys
from taguru_eval.tables.shapes import EvidenceSelection, PositionOutcome, RerankerPlan

Binary32 = Callable[[float], Any]
"""Writes one binary32 value: as an :class:`F32`, or as a placeholder whose value
goes to a list (:func:`_slotted`)."""


def _slotted(values: list[float]) -> Binary32:
    slot = binary32_slot()

    def placeholder(value: float) -> Any:
        values.append(value)
        return slot

    return placeholder


def _hit(hit: Mapping[str, Any], f32: Binary32) -> dict[str, Any]:
    # A 100,000-case artifact writes about 700,000 hits: spelled out, not looped.
    lanes = hit.get("lanes") or {}
    score = f32(hit.get("score", 0.0))  # written before the lanes' scores
    written: dict[str, Any] = {}
    if "bm25" in lanes:
        bm25 = lanes["bm25"]
        written["bm25"] = {"rank": bm25["rank"], "score": f32(bm25["score"])}
    if "vector" in lanes:
        vector = lanes["vector"]
        written["vector"] = {"rank": vector["rank"], "score": f32(vector["score"])}
    return {
        "source": hit["source"],
        "paragraph": hit["paragraph"],
        "score": score,
        "lanes": written,
    }


def _lane_plan(plan: Mapping[str, Any], f32: Binary32) -> dict[str, Any]:
    out: dict[str, Any] = {"ran": plan["ran"]}
    if plan.get("reason") is not None:
        out["reason"] = plan["reason"]
    if plan.get("floor") is not None:
        out["floor"] = f32(plan["floor"])
    return out


def _plan(plan: Mapping[str, Any], f32: Binary32) -> dict[str, Any]:
    lanes = plan["lanes"]
    out: dict[str, Any] = {
        "context": plan["context"],
        "lanes": {
            "bm25": _lane_plan(lanes["bm25"], f32),
            "vector": _lane_plan(lanes["vector"], f32),
        },
    }
    if plan.get("filter") is not None:
        flt = plan["filter"]
        out["filter"] = {
            "eligible_sources": flt["eligible_sources"],
            "total_sources": flt["total_sources"],
        }
    return out


def passage_block(
    passage: Mapping[str, Any], binary32: list[float] | None = None
) -> dict[str, Any]:
    """``{outcome: searched, plan?, hits, latency_ms}`` or ``{outcome: failed, message, ...}``.

    With ``binary32`` its scores and floors are placeholders and their values
    go to that list, in the order they are written."""
    if passage["outcome"] == "searched":
        f32: Binary32 = F32 if binary32 is None else _slotted(binary32)
        out: dict[str, Any] = {"outcome": "searched"}
        if passage.get("plan") is not None:
            out["plan"] = _plan(passage["plan"], f32)
        out["hits"] = [_hit(hit, f32) for hit in passage.get("hits") or []]
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


_POSITION_DETAIL: Final = keys(PositionOutcome, required=False)
"""What a position outcome may add between ``outcome`` and ``latency_ms``; an
outcome the spec does not name writes whichever of them it holds."""

_POSITION_KEYS: Final = {
    outcome: tuple(key for key in _POSITION_DETAIL if key in written)
    for outcome, written in {
        "not_found": set(),
        "resolved": {"name", "tier"},
        "ambiguous": {"tier", "candidates"},
        "errored": {"message"},
    }.items()
}
"""Which keys each outcome writes (EVALUATE.md §3.5's table), in declaration order."""


def _position(position: Mapping[str, Any]) -> dict[str, Any]:
    outcome = position["outcome"]
    out: dict[str, Any] = {"outcome": outcome}
    for key in _POSITION_KEYS.get(outcome, _POSITION_DETAIL):
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


def _evidence_item(item: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {
        "candidate_id": item["candidate_id"],
        "kind": item["kind"],
        "fused_rank": item["fused_rank"],
    }
    if item.get("source") is not None:
        out["source"] = item["source"]
        out["paragraph"] = item["paragraph"]
    out["citation_refs"] = [
        {"source": ref["source"], "paragraph": ref["paragraph"]}
        for ref in item.get("citation_refs") or []
    ]
    return out


_RERANKER_OPTIONAL: Final = keys(RerankerPlan, required=False)
_SELECTION: Final = keys(EvidenceSelection)


def _reranker(reranker: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"configured": reranker["configured"], "ran": reranker["ran"]}
    for key in _RERANKER_OPTIONAL:
        if reranker.get(key) is not None:
            out[key] = reranker[key]
    return out


def evidence_block(evidence: Mapping[str, Any]) -> dict[str, Any]:
    """§7.4: ``{outcome: assembled, latency_ms, items, omitted_by_reason?, selection,
    reranker}`` (items without payloads or lane ranks) or ``{outcome: failed, message,
    latency_ms}``."""
    if evidence["outcome"] != "assembled":
        return {
            "outcome": evidence["outcome"],
            "message": evidence.get("message", ""),
            "latency_ms": evidence["latency_ms"],
        }
    out: dict[str, Any] = {
        "outcome": "assembled",
        "latency_ms": evidence["latency_ms"],
        "items": [_evidence_item(item) for item in evidence.get("items") or []],
    }
    if evidence.get("omitted_by_reason"):
        out["omitted_by_reason"] = dict(evidence["omitted_by_reason"])
    selection = evidence["selection"]
    out["selection"] = {key: selection[key] for key in _SELECTION}
    out["reranker"] = _reranker(evidence["reranker"])
    return out

"""The must-refuse blocks of evaluation.json (ABSTENTION.md §3.8), written from the frames.

* the top-level ``abstention`` block: rule, claim, the vector facts, verdict
  counts, one entry per must-refuse case (verdict, reason, per-probe detail,
  at most three hit locators and three candidates per cue — locators, lane
  ranks and the author's own query and note, never paragraph text) and the
  warnings;
* the per-case ``answerability`` entry of an answerable eval case.

Nothing is judged here: verdicts and counts come from the scorer's
``refusal_cases`` and ``cases`` frames, the probe detail from the tables.
The reader side (:func:`refusal_frames_from_block`) turns the block back into
the ``refusal_lanes`` and ``refusal_cases`` rows it carries.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

import polars as pl

from taguru_eval._base.text import F32
from taguru_eval.artifact.layout import get_path
from taguru_eval.score.abstention import (
    PASSAGE_VECTORS_NOT_READY,
    SURFACED,
    UNDETERMINED,
    VECTOR_LANE_NOT_RUN,
    VERDICTS,
    effective_floors,
)
from taguru_eval.tables.schemas import (
    POPULATION_EVAL,
    POPULATION_MUST_REFUSE,
    REFUSAL_CASES,
    REFUSAL_LANES,
    RunTables,
    conform,
)

if TYPE_CHECKING:
    # A type only: reading an artifact back needs no HTTP client.
    from taguru_eval.run.preflight import PassageSidecar

CLAIM: Final = "within each probe's served window, nothing cleared the bar the server applied"
"""What an ``abstained`` verdict claims (§2.8) — and no more."""

TOP_LIMIT: Final = 3
"""Hit locators (and candidates per cue) an entry lists; the rest are counted."""


@dataclass(frozen=True)
class VectorFacts:
    """The run-level vector facts: the embedding identity read before the cases."""

    embeddings_read: bool
    provider_model: str | None
    passages: PassageSidecar | None

    @property
    def passage_vectors(self) -> str:
        """``ready`` when the passage sidecar was embedded by the configured model
        and holds rows; otherwise why not (``off``, ``absent``, ``empty``,
        ``model_mismatch``, or ``unknown`` when the status could not be read)."""
        if not self.embeddings_read:
            return "unknown"
        if self.provider_model is None:
            return "off"
        if self.passages is None:
            return "absent"
        if self.passages.model != self.provider_model:
            return "model_mismatch"
        return "ready" if self.passages.rows > 0 else "empty"


def _f32_list(values: Sequence[float]) -> list[F32]:
    return [F32(value) for value in values]


def _lanes(row: Mapping[str, Any]) -> dict[str, Any]:
    lanes: dict[str, Any] = {}
    for lane in ("bm25", "vector"):
        if row[f"{lane}_rank"] is not None:
            lanes[lane] = {"rank": row[f"{lane}_rank"], "score": F32(row[f"{lane}_score"])}
    return lanes


def _top_hits(hits: pl.DataFrame) -> dict[int, list[dict[str, Any]]]:
    top: dict[int, list[dict[str, Any]]] = {}
    for row in (
        hits.filter(pl.col("rank") < TOP_LIMIT).sort("case_index", "rank").iter_rows(named=True)
    ):
        top.setdefault(row["case_index"], []).append(
            {"source": row["source"], "paragraph": row["paragraph"], "lanes": _lanes(row)}
        )
    return top


def _cue_entries(resolutions: pl.DataFrame) -> dict[int, list[dict[str, Any]]]:
    cues: dict[int, list[dict[str, Any]]] = {}
    ordered = resolutions.sort("case_index", "cue_index", "rank", nulls_last=True)
    for _key, rows in ordered.group_by(["case_index", "cue_index"], maintain_order=True):
        first = rows.row(0, named=True)
        named = rows.filter(pl.col("name").is_not_null())
        candidates = []
        for row in named.head(TOP_LIMIT).iter_rows(named=True):
            candidate: dict[str, Any] = {"name": row["name"], "tier": row["tier"]}
            if row["match_kind"] is not None:
                candidate["kind"] = row["match_kind"]
            candidates.append(candidate)
        entry: dict[str, Any] = {
            "cue": first["cue"],
            "candidates": candidates,
            "candidates_truncated": max(named.height - TOP_LIMIT, 0),
            "latency_ms": first["latency_ms"],
        }
        if first["error"] is not None:
            entry["error"] = first["error"]
        cues.setdefault(first["case_index"], []).append(entry)
    return cues


def _passage_entry(lane: Mapping[str, Any], verdict: Mapping[str, Any], top: list[Any]) -> Any:
    if lane["passage_outcome"] != "searched":
        return {
            "outcome": lane["passage_outcome"],
            "verdict": verdict["passage_verdict"],
            "reason": verdict["passage_reason"],
            "message": lane["passage_message"] or "",
            "latency_ms": lane["passage_latency_ms"],
        }
    entry: dict[str, Any] = {"outcome": "searched", "verdict": verdict["passage_verdict"]}
    if verdict["passage_reason"] is not None:
        entry["reason"] = verdict["passage_reason"]
    entry["limit"] = lane["limit"]
    entry["vector_ran"] = bool(lane["plan_vector_ran"])
    if lane["plan_vector_reason"] is not None:
        entry["vector_reason"] = lane["plan_vector_reason"]
    if lane["plan_vector_floor"] is not None:
        entry["floor"] = F32(lane["plan_vector_floor"])
    entry["hits_served"] = verdict["hits_served"]
    entry["vector_hits"] = verdict["vector_hits"]
    entry["bm25_only_hits"] = verdict["bm25_only_hits"]
    entry["top"] = top
    entry["top_truncated"] = max(verdict["hits_served"] - len(top), 0)
    entry["latency_ms"] = lane["passage_latency_ms"]
    return entry


def _top_items(items: pl.DataFrame) -> dict[int, list[dict[str, Any]]]:
    """The first admitted items of each evidence probe: kind, locator, lanes."""
    top: dict[int, list[dict[str, Any]]] = {}
    admitted = items.filter(pl.col("admitted").fill_null(False)).sort("case_index", "item_index")
    for row in admitted.iter_rows(named=True):
        listed = top.setdefault(row["case_index"], [])
        if len(listed) >= TOP_LIMIT:
            continue
        item: dict[str, Any] = {"kind": row["kind"]}
        if row["source"] is not None:
            item["source"] = row["source"]
            item["paragraph"] = row["paragraph"]
        item["lanes"] = [rank["lane"] for rank in row["lane_ranks"] or []]
        listed.append(item)
    return top


def _evidence_entry(lane: Mapping[str, Any], verdict: Mapping[str, Any], top: list[Any]) -> Any:
    if lane["evidence_outcome"] != "assembled":
        return {
            "outcome": lane["evidence_outcome"] or lane["passage_outcome"],
            "verdict": verdict["passage_verdict"],
            "reason": verdict["passage_reason"],
            "message": lane["passage_message"] or "",
            "latency_ms": lane["passage_latency_ms"],
        }
    omitted = lane["omitted_total"] or 0
    entry: dict[str, Any] = {"outcome": "assembled", "verdict": verdict["passage_verdict"]}
    if verdict["passage_reason"] is not None:
        entry["reason"] = verdict["passage_reason"]
    entry["limit"] = lane["limit"]
    entry["items_admitted"] = verdict["hits_served"]
    entry["vector_passages"] = verdict["vector_hits"]
    entry["bm25_only_passages"] = verdict["bm25_only_hits"]
    entry["omitted_total"] = omitted
    entry["budget_hid"] = omitted > 0
    entry["top"] = top
    entry["top_truncated"] = max(verdict["hits_served"] - len(top), 0)
    entry["latency_ms"] = lane["passage_latency_ms"]
    return entry


def abstention_cases(must_refuse: RunTables, refusals: pl.DataFrame) -> list[dict[str, Any]]:
    """The block's ``cases``: one entry per must-refuse case, in file order; the
    passage probe's detail under ``passage``, or the evidence probe's under
    ``evidence`` (``--assembly``)."""
    top = _top_hits(must_refuse.hits)
    items = _top_items(must_refuse.evidence_items)
    cues = _cue_entries(must_refuse.resolutions)
    verdicts = {row["case_index"]: row for row in refusals.iter_rows(named=True)}
    entries: list[dict[str, Any]] = []
    for lane in must_refuse.refusal_lanes.sort("case_index").iter_rows(named=True):
        verdict = verdicts[lane["case_index"]]
        entry: dict[str, Any] = {"case_id": lane["case_id"], "kind": lane["kind"]}
        if lane["why"] is not None:
            entry["why"] = lane["why"]
        entry["query"] = lane["query"]
        entry["verdict"] = verdict["verdict"]
        if verdict["reason"] is not None:
            entry["reason"] = verdict["reason"]
        if lane["evidence_outcome"] is None:
            entry["passage"] = _passage_entry(lane, verdict, top.get(lane["case_index"], []))
        else:
            entry["evidence"] = _evidence_entry(lane, verdict, items.get(lane["case_index"], []))
        if verdict["structural_verdict"] is not None:
            structural: dict[str, Any] = {"verdict": verdict["structural_verdict"]}
            if verdict["structural_reason"] is not None:
                structural["reason"] = verdict["structural_reason"]
            structural["cues"] = cues.get(lane["case_index"], [])
            entry["structural"] = structural
        entries.append(entry)
    return entries


ASSEMBLY_CAVEAT: Final = (
    "under --assembly the evidence probe cannot see a per-call query-embedding failure "
    "(the package's passages plan carries no vector status): the gate is recommended in "
    "baseline mode"
)


def abstention_warnings(
    rule: str,
    must_refuse: RunTables,
    refusals: pl.DataFrame,
    floors: Sequence[float],
) -> list[str]:
    """The block's ``warnings`` (also printed on stderr): what limits the claim."""
    warnings: list[str] = []
    if must_refuse.refusal_lanes.get_column("evidence_outcome").is_not_null().any():
        warnings.append(ASSEMBLY_CAVEAT)
        not_ready = refusals.filter(pl.col("passage_reason") == PASSAGE_VECTORS_NOT_READY)
        if not_ready.height:
            warnings.append(
                "the embeddings status shows no ready passage vectors: "
                f"{not_ready.height} evidence probe(s) cannot judge their passage items and "
                "are undetermined"
            )
    not_run = refusals.filter(pl.col("passage_reason") == VECTOR_LANE_NOT_RUN)
    if rule == "semantic" and not_run.height:
        reasons = (
            must_refuse.refusal_lanes.filter(
                pl.col("case_index").is_in(not_run.get_column("case_index").implode())
            )
            .get_column("plan_vector_reason")
            .drop_nulls()
            .unique(maintain_order=True)
            .to_list()
        )
        because = f" ({'; '.join(reasons)})" if reasons else ""
        warnings.append(
            f"rule 'semantic': the server's vector lane did not run{because} — "
            f"{not_run.height} passage probe(s) cannot judge and are undetermined, never "
            "counted as abstained; to judge them: --refusal-rule any, or a server whose "
            "vector lane runs"
        )
    undetermined = refusals.filter(pl.col("verdict") == UNDETERMINED)
    if undetermined.height:
        ids = ", ".join(undetermined.get_column("case_id").to_list())
        warnings.append(f"{undetermined.height} must-refuse case(s) undetermined: {ids}")
    if len(floors) > 1:
        spelled = ", ".join(repr(float(F32(value))) for value in floors)
        warnings.append(
            f"the effective vector floors differ across the run ({spelled}): the answerable "
            "and must-refuse populations were not judged under one bar, so the "
            "answerability view does not compare like with like"
        )
    return warnings


def abstention_block(
    rule: str,
    tables: RunTables,
    refusals: pl.DataFrame,
    vector: VectorFacts,
    notes: Sequence[str] = (),
) -> dict[str, Any]:
    """The top-level ``abstention`` block (§3.8), keys in the spec's order.

    ``tables`` are the whole run's tables (both populations): the effective
    floors are those of every passage lane of the run. ``notes`` are warnings
    found before the run (a must-refuse filter ``--assembly`` cannot send).
    """
    must_refuse = tables.of_population(POPULATION_MUST_REFUSE)
    floors = effective_floors(
        tables.of_population(POPULATION_EVAL).case_lanes, tables.refusal_lanes
    )
    warnings = [*notes, *abstention_warnings(rule, must_refuse, refusals, floors)]
    tally = dict.fromkeys(VERDICTS, 0)
    for verdict, count in refusals.group_by("verdict").len().iter_rows():
        tally[verdict] = count
    return {
        "rule": rule,
        "claim": CLAIM,
        "vector": {
            "provider_model": vector.provider_model,
            "passage_vectors": vector.passage_vectors,
            "effective_floors": _f32_list(floors),
            "floors_coherent": len(floors) <= 1,
        },
        "counts": tally,
        "cases": abstention_cases(must_refuse, refusals),
        "warnings": warnings,
    }


def answerability_entries(cases: pl.DataFrame) -> dict[str, dict[str, Any]]:
    """``case_id -> {"answerability": {verdict, reason?, supported}}`` for every
    answerable case (the ``case_extras`` of the artifact writer)."""
    extras: dict[str, dict[str, Any]] = {}
    answerable = cases.filter(pl.col("answerability_verdict").is_not_null())
    for case_id, verdict, reason, supported in answerable.select(
        "case_id", "answerability_verdict", "answerability_reason", "supported"
    ).iter_rows():
        entry: dict[str, Any] = {"verdict": verdict}
        if reason is not None:
            entry["reason"] = reason
        entry["supported"] = bool(supported)
        extras[case_id] = {"answerability": entry}
    return extras


# ------------------------------------------------------------------ reading back


def refusal_frames_from_block(
    block: Mapping[str, Any] | None, run_id: str
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """``(refusal_lanes, refusal_cases)`` as an ``abstention`` block recorded them.

    The block carries the verdicts, the counts and each passage probe's plan
    facts (vector lane ran, its reason and floor) — not every served hit, so
    the ``hits``/``resolutions`` rows of the probes are not rebuilt.
    """
    entries = [entry for entry in (get_path(block, "cases") or []) if isinstance(entry, Mapping)]
    lanes: list[dict[str, Any]] = []
    verdicts: list[dict[str, Any]] = []
    for index, entry in enumerate(entries):
        evidence = get_path(entry, "evidence")
        passage = evidence if isinstance(evidence, Mapping) else get_path(entry, "passage") or {}
        structural = get_path(entry, "structural")
        cues = list(get_path(structural, "cues") or [])
        lanes.append(
            {
                "run_id": run_id,
                "case_index": index,
                "case_id": entry.get("case_id"),
                "kind": entry.get("kind"),
                "why": entry.get("why"),
                "query": entry.get("query"),
                "cues": [cue.get("cue") for cue in cues if isinstance(cue, Mapping)],
                "limit": passage.get("limit"),
                "passage_outcome": passage.get("outcome"),
                "passage_message": passage.get("message"),
                "passage_latency_ms": passage.get("latency_ms"),
                "hit_count": passage.get("hits_served", passage.get("items_admitted")),
                "plan_vector_ran": passage.get("vector_ran"),
                "plan_vector_reason": passage.get("vector_reason"),
                "plan_vector_floor": passage.get("floor"),
                "structural_ran": structural is not None,
                "evidence_outcome": None if evidence is None else passage.get("outcome"),
                "omitted_total": passage.get("omitted_total"),
            }
        )
        passage_verdict = passage.get("verdict")
        structural_verdict = get_path(structural, "verdict")
        surfaced_by = (
            ("passage" if evidence is None else "evidence")
            if passage_verdict == SURFACED
            else "structural"
            if structural_verdict == SURFACED
            else None
        )
        verdicts.append(
            {
                "run_id": run_id,
                "case_index": index,
                "case_id": entry.get("case_id"),
                "kind": entry.get("kind"),
                "verdict": entry.get("verdict"),
                "reason": entry.get("reason"),
                "surfaced_by": surfaced_by,
                "passage_verdict": passage_verdict,
                "passage_reason": passage.get("reason"),
                "hits_served": passage.get("hits_served", passage.get("items_admitted")),
                "vector_hits": passage.get("vector_hits", passage.get("vector_passages")),
                "bm25_only_hits": passage.get("bm25_only_hits", passage.get("bm25_only_passages")),
                "structural_verdict": structural_verdict,
                "structural_reason": get_path(structural, "reason"),
                "cues_surfaced": sum(1 for cue in cues if get_path(cue, "candidates"))
                if structural is not None
                else None,
                "cues_failed": sum(1 for cue in cues if get_path(cue, "error") is not None)
                if structural is not None
                else None,
            }
        )
    return (
        _frame(lanes, REFUSAL_LANES),
        _frame(verdicts, REFUSAL_CASES),
    )


def _frame(rows: list[dict[str, Any]], schema: pl.Schema) -> pl.DataFrame:
    if not rows:
        return pl.DataFrame(schema=schema)
    strict = {name: dtype for name, dtype in schema.items() if name in rows[0]}
    return conform(pl.DataFrame(rows, schema=strict, strict=False), schema)

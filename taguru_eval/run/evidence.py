"""The evidence lane of ``--assembly``: request, strict decoding, hits (EVALUATE.md §7.2, §7.4).

With ``--assembly`` a case's passage lane is one ``POST /contexts/{name}/evidence``
instead of ``sources/search``. The body is the one taguru's client sends
(``origins`` = cues or ``[query]``, ``text_fallback_query``, ``search_limit``,
``semantic_floor``, the resolved ``budget`` and, with ``--rerank``, the
model); ``tags``/``since``/``until`` cannot be sent.

The answer is decoded as strictly as the reference decodes an
``EvidencePackage`` (HTTP.md §6.9): every item, citation and omission, the
budget usage, the lane plans, selection and reranker must be well-formed;
unknown keys are ignored and ``kind`` is an open vocabulary (an unknown kind
is kept; like an association it has no locator of its own). A package whose
``budget`` is not the budget that was sent, or whose usage exceeds it, is not
the package that was asked for and fails the lane like a malformed one.

From a package: the scoring hits (each item's own locator, then its
``citation_refs``, first ``limit`` of them, score 0.0 and no lanes), the
case's ``budget`` block, the artifact's ``evidence`` block (no payload, no
text) and the ``evidence_items`` rows. A failed call or an unusable package
makes both ``passage`` and ``evidence`` failed, with no budget and no rows.
"""

from __future__ import annotations

from dataclasses import dataclass

from taguru_eval._base import jsonstrict as js
from taguru_eval._base.text import truncate_utf8
from taguru_eval.inputs.dataset import EvalCase
from taguru_eval.options import Budget
from taguru_eval.run.client import CallFailure, TaguruClient
from taguru_eval.run.payloads import read_association, read_lane_plan, read_passage_hit, require
from taguru_eval.tables.shapes import (
    BudgetLimits,
    BudgetUsage,
    CitationRef,
    EvidenceItem,
    EvidenceOutcome,
    EvidenceRow,
    EvidenceSelection,
    HitLocator,
    LaneRank,
    PassageOutcome,
    RerankerPlan,
)

NO_PACKAGE = "response carries no recognizable evidence package ({detail})"
"""The message of a package that cannot be used (EVALUATE.md §3.7; not truncated)."""

PLAN_LANES = ("resolve", "query", "activate", "passages", "communities", "citations")
"""The lane plans an ``EvidencePackage`` always carries (HTTP.md §6.9)."""


@dataclass(frozen=True, slots=True)
class Assembly:
    """What every evidence call of an ``--assembly`` run sends besides the case:
    the resolved budget (defaults 40/65536/4000 without ``--max-*``) and the
    ``--rerank`` model."""

    budget: Budget
    rerank: str | None = None


def evidence_body(case: EvalCase, assembly: Assembly) -> dict[str, object]:
    """The request body (EVALUATE.md §7.2), keys in the order taguru's client sends them.

    taguru builds it with ``serde_json::json!``, whose objects keep their keys
    sorted; absent options are JSON ``null``.
    """
    budget = assembly.budget
    body: dict[str, object] = {
        "budget": {
            "max_bytes": budget.max_bytes,
            "max_items": budget.max_items,
            "max_tokens": budget.max_tokens,
        },
        "origins": list(case.cues) if case.cues else [case.query],
    }
    if assembly.rerank is not None:
        body["rerank"] = {"model": assembly.rerank}
    body["search_limit"] = case.effective_limit
    body["semantic_floor"] = case.options.floor
    body["text_fallback_query"] = case.query
    return body


# --------------------------------------------------------------------------- the package


class PackageError(ValueError):
    """An evidence answer evaluate cannot use; ``detail`` goes into :data:`NO_PACKAGE`."""

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


@dataclass(frozen=True, slots=True)
class PackageItem:
    """One admitted item, without its payload's text."""

    candidate_id: str
    kind: str
    fused_rank: int
    lane_ranks: list[LaneRank]
    citation_refs: list[CitationRef]
    locator: tuple[str, int] | None  # the item's own (source, paragraph)


@dataclass(frozen=True, slots=True)
class Omission:
    candidate_id: str
    kind: str
    reason: str
    duplicate_of: str | None


@dataclass(frozen=True, slots=True)
class Package:
    """The parts of an ``EvidencePackage`` evaluate keeps."""

    items: list[PackageItem]
    budget: BudgetUsage  # with the package's omitted_total
    omitted: list[Omission]
    omitted_by_reason: dict[str, int]
    selection: EvidenceSelection
    reranker: RerankerPlan


def _citation_ref(value: object, path: js.JsonPath) -> CitationRef:
    obj = js.read_object(value, path)
    return CitationRef(
        source=js.read_str(require(obj, "source", path), (*path, "source")),
        paragraph=js.read_u32(require(obj, "paragraph", path), (*path, "paragraph")),
    )


def _lane_rank(value: object, path: js.JsonPath) -> LaneRank:
    obj = js.read_object(value, path)
    return LaneRank(
        lane=js.read_str(require(obj, "lane", path), (*path, "lane")),
        rank=js.read_usize(require(obj, "rank", path), (*path, "rank")),
    )


def _community_locator(value: object, path: js.JsonPath) -> tuple[str, int]:
    """A ``CommunityHit``'s locator, ``community:{id}`` and its paragraph."""
    obj = js.read_object(value, path)
    community = js.read_str(require(obj, "community", path), (*path, "community"))
    paragraph = js.read_u32(require(obj, "paragraph", path), (*path, "paragraph"))
    js.read_f32(require(obj, "score", path), (*path, "score"))
    js.read_str(require(obj, "text", path), (*path, "text"))
    return f"community:{community}", paragraph


def _corroboration(value: object, path: js.JsonPath) -> None:
    obj = js.read_object(value, path)
    js.read_str_array(require(obj, "sources", path), (*path, "sources"))
    js.read_array(require(obj, "attributions", path), (*path, "attributions"), _citation_ref)


def _item(value: object, path: js.JsonPath) -> PackageItem:
    obj = js.read_object(value, path)

    def field(key: str) -> object:
        return require(obj, key, path)

    candidate_id = js.read_str(field("candidate_id"), (*path, "candidate_id"))
    kind = js.read_str(field("kind"), (*path, "kind"))
    fused_rank = js.read_usize(field("fused_rank"), (*path, "fused_rank"))
    lane_ranks = js.read_array(field("lane_ranks"), (*path, "lane_ranks"), _lane_rank)
    refs = js.read_array(field("citation_refs"), (*path, "citation_refs"), _citation_ref)
    js.read_usize(field("bytes"), (*path, "bytes"))
    js.read_usize(field("estimated_tokens"), (*path, "estimated_tokens"))
    js.read_optional(obj.get("corroboration"), (*path, "corroboration"), _corroboration)
    if "contradicts" in obj:
        js.read_str_array(obj["contradicts"], (*path, "contradicts"))
    js.read_optional(obj.get("association"), (*path, "association"), read_association)
    # The item's own locator comes from its payload, whatever its kind says.
    passage = js.read_optional(obj.get("passage"), (*path, "passage"), read_passage_hit)
    community = js.read_optional(obj.get("community"), (*path, "community"), _community_locator)
    locator = (passage.source, passage.paragraph) if passage is not None else community
    return PackageItem(candidate_id, kind, fused_rank, lane_ranks, refs, locator)


def _citation_entry(value: object, path: js.JsonPath) -> None:
    obj = js.read_object(value, path)
    _citation_ref(obj, path)
    cited_path = (*path, "citation")
    cited = js.read_object(require(obj, "citation", path), cited_path)
    js.read_str(require(cited, "text", cited_path), (*cited_path, "text"))
    js.read_str(require(cited, "source", cited_path), (*cited_path, "source"))
    js.read_optional(cited.get("section"), (*cited_path, "section"), js.read_str)


def _omission(value: object, path: js.JsonPath) -> Omission:
    obj = js.read_object(value, path)
    return Omission(
        candidate_id=js.read_str(require(obj, "candidate_id", path), (*path, "candidate_id")),
        kind=js.read_str(require(obj, "kind", path), (*path, "kind")),
        reason=js.read_str(require(obj, "reason", path), (*path, "reason")),
        duplicate_of=js.read_optional(
            obj.get("duplicate_of"), (*path, "duplicate_of"), js.read_str
        ),
    )


def _usize_fields(value: object, path: js.JsonPath, keys: tuple[str, ...]) -> dict[str, int]:
    obj = js.read_object(value, path)
    return {key: js.read_usize(require(obj, key, path), (*path, key)) for key in keys}


def _budget(value: object, omitted_total: int) -> BudgetUsage:
    path: js.JsonPath = ("budget",)
    used = _usize_fields(value, path, ("items_used", "bytes_used", "tokens_used"))
    limits_value = require(js.read_object(value, path), "limits", path)
    limits = _usize_fields(
        limits_value, ("budget", "limits"), ("max_items", "max_bytes", "max_tokens")
    )
    return BudgetUsage(
        items_used=used["items_used"],
        bytes_used=used["bytes_used"],
        tokens_used=used["tokens_used"],
        limits=BudgetLimits(
            max_items=limits["max_items"],
            max_bytes=limits["max_bytes"],
            max_tokens=limits["max_tokens"],
        ),
        omitted_total=omitted_total,
    )


def _reranker(value: object, path: js.JsonPath) -> RerankerPlan:
    obj = js.read_object(value, path)
    plan = RerankerPlan(
        configured=js.read_bool(require(obj, "configured", path), (*path, "configured")),
        ran=js.read_bool(require(obj, "ran", path), (*path, "ran")),
    )
    model = js.read_optional(obj.get("model"), (*path, "model"), js.read_str)
    if model is not None:
        plan["model"] = model
    reason = js.read_optional(obj.get("reason"), (*path, "reason"), js.read_str)
    if reason is not None:
        plan["reason"] = reason
    return plan


def _plan(value: object) -> tuple[EvidenceSelection, RerankerPlan]:
    path: js.JsonPath = ("plan",)
    plan = js.read_object(value, path)
    lanes_path = (*path, "lanes")
    lanes = js.read_object(require(plan, "lanes", path), lanes_path)
    for lane in PLAN_LANES:
        read_lane_plan(require(lanes, lane, lanes_path), (*lanes_path, lane))
    selection = _usize_fields(
        require(plan, "selection", path),
        (*path, "selection"),
        ("dedup_dropped", "contradiction_groups", "diversity_tier_width"),
    )
    reranker = _reranker(require(plan, "reranker", path), (*path, "reranker"))
    return (
        EvidenceSelection(
            dedup_dropped=selection["dedup_dropped"],
            contradiction_groups=selection["contradiction_groups"],
            diversity_tier_width=selection["diversity_tier_width"],
        ),
        reranker,
    )


def _check_budget(usage: BudgetUsage, items: int, requested: Budget) -> None:
    """The package must have been assembled under the budget that was sent."""
    given = usage["limits"]
    limits = {
        "max_items": given["max_items"],
        "max_bytes": given["max_bytes"],
        "max_tokens": given["max_tokens"],
    }
    wanted = requested.to_json()
    if limits != wanted:
        shown = ", ".join(f"{key} {value}" for key, value in wanted.items())
        raise PackageError(f"budget.limits: not the requested budget ({shown})")
    spent = {
        "items_used": (usage["items_used"], "max_items"),
        "bytes_used": (usage["bytes_used"], "max_bytes"),
        "tokens_used": (usage["tokens_used"], "max_tokens"),
    }
    for used, (value, limit) in spent.items():
        if value > limits[limit]:
            raise PackageError(
                f"budget.{used}: {value} exceeds budget.limits.{limit} {limits[limit]}"
            )
    if usage["items_used"] != items:
        raise PackageError(f"budget.items_used: {usage['items_used']} but items holds {items}")


def decode_package(payload: object, requested: Budget) -> Package:
    """The package evaluate keeps, or :class:`PackageError` naming the first problem."""
    try:
        package = js.read_object(payload, ())
        items = js.read_array(require(package, "items", ()), ("items",), _item)
        js.read_array(require(package, "citations", ()), ("citations",), _citation_entry)
        raw_budget = require(package, "budget", ())
        omitted = js.read_array(require(package, "omitted", ()), ("omitted",), _omission)
        omitted_total = js.read_usize(require(package, "omitted_total", ()), ("omitted_total",))
        by_reason = js.read_map(
            require(package, "omitted_by_reason", ()), ("omitted_by_reason",), js.read_usize
        )
        budget = _budget(raw_budget, omitted_total)
        selection, reranker = _plan(require(package, "plan", ()))
    except js.JsonShapeError as exc:
        raise PackageError(exc.detail) from None
    _check_budget(budget, len(items), requested)
    return Package(
        items=items,
        budget=budget,
        omitted=omitted,
        omitted_by_reason={reason: by_reason[reason] for reason in sorted(by_reason)},
        selection=selection,
        reranker=reranker,
    )


# --------------------------------------------------------------------------- what a case keeps


def hits_from_items(items: list[PackageItem], limit: int) -> list[HitLocator]:
    """The scoring hits: each item's own locator, then its ``citation_refs``; the
    first ``limit`` (the case's limit, so both modes score over the same k)."""
    locators: list[tuple[str, int]] = []
    for item in items:
        if item.locator is not None:
            locators.append(item.locator)
        locators.extend((ref["source"], ref["paragraph"]) for ref in item.citation_refs)
        if len(locators) >= limit:
            break
    return [
        HitLocator(source=source, paragraph=paragraph, score=0.0, lanes={})
        for source, paragraph in locators[:limit]
    ]


def _artifact_item(item: PackageItem) -> EvidenceItem:
    """An admitted item as the artifact lists it (the writer orders the keys)."""
    out = EvidenceItem(
        candidate_id=item.candidate_id,
        kind=item.kind,
        fused_rank=item.fused_rank,
        citation_refs=list(item.citation_refs),
    )
    if item.locator is not None:
        out["source"], out["paragraph"] = item.locator
    return out


def evidence_block(package: Package, latency_ms: int) -> EvidenceOutcome:
    """The case's ``evidence`` block (§7.4), keys in the artifact's order."""
    block = EvidenceOutcome(outcome="assembled", latency_ms=latency_ms)
    block["items"] = [_artifact_item(item) for item in package.items]
    if package.omitted_by_reason:
        block["omitted_by_reason"] = dict(package.omitted_by_reason)
    block["selection"] = package.selection
    block["reranker"] = package.reranker
    return block


def evidence_rows(package: Package) -> list[EvidenceRow]:
    """The ``evidence_items`` rows: admitted items, then the listed omissions."""
    admitted = [
        EvidenceRow(
            candidate_id=item.candidate_id,
            kind=item.kind,
            admitted=True,
            fused_rank=item.fused_rank,
            source=None if item.locator is None else item.locator[0],
            paragraph=None if item.locator is None else item.locator[1],
            lane_ranks=list(item.lane_ranks),
            citation_refs=list(item.citation_refs),
            omitted_reason=None,
            duplicate_of=None,
        )
        for item in package.items
    ]
    omitted = [
        EvidenceRow(
            candidate_id=omission.candidate_id,
            kind=omission.kind,
            admitted=False,
            fused_rank=None,
            source=None,
            paragraph=None,
            lane_ranks=None,
            citation_refs=None,
            omitted_reason=omission.reason,
            duplicate_of=omission.duplicate_of,
        )
        for omission in package.omitted
    ]
    return admitted + omitted


@dataclass(frozen=True)
class EvidenceResult:
    """One case's evidence lane: what scoring reads and what the artifact and tables keep."""

    passage: PassageOutcome
    evidence: EvidenceOutcome
    rows: list[EvidenceRow]
    budget: BudgetUsage | None
    http_status: int | None

    @property
    def message(self) -> str | None:
        return self.evidence.get("message")


def _failed(message: str, latency_ms: int, status: int | None) -> EvidenceResult:
    return EvidenceResult(
        passage=PassageOutcome(outcome="failed", message=message, latency_ms=latency_ms),
        evidence=EvidenceOutcome(outcome="failed", message=message, latency_ms=latency_ms),
        rows=[],
        budget=None,
        http_status=status,
    )


async def evidence_lane(
    client: TaguruClient, context: str, case: EvalCase, assembly: Assembly
) -> EvidenceResult:
    """``POST …/evidence`` for one case; never raises for a server's answer."""
    try:
        reply = await client.post(["contexts", context, "evidence"], evidence_body(case, assembly))
    except CallFailure as failure:
        return _failed(truncate_utf8(failure.message), failure.latency_ms, failure.status)
    try:
        package = decode_package(reply.payload, assembly.budget)
    except PackageError as exc:
        return _failed(NO_PACKAGE.format(detail=exc.detail), reply.latency_ms, reply.status)
    hits = hits_from_items(package.items, case.effective_limit)
    return EvidenceResult(
        passage=PassageOutcome(outcome="searched", hits=hits, latency_ms=reply.latency_ms),
        evidence=evidence_block(package, reply.latency_ms),
        rows=evidence_rows(package),
        budget=package.budget,
        http_status=reply.status,
    )

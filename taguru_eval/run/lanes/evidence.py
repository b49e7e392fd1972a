"""The evidence lane of ``--assembly``: request, strict decoding, hits (EVALUATE.md §7.2, §7.4).

With ``--assembly`` a case's passage lane is one ``POST /contexts/{name}/evidence``
instead of ``sources/search``. The body is the one taguru's client sends
(``origins`` = cues or ``[query]``, ``text_fallback_query``, ``search_limit``,
``semantic_floor``, the resolved ``budget`` and, with ``--rerank``, the
model); ``tags``/``since``/``until`` cannot be sent.

The answer is decoded as strictly as the reference decodes an
``EvidencePackage`` (HTTP.md §6.9), by msgspec against structs typed as taguru
types them: every item (with its payload), citation and omission, the budget
usage, the six lane plans, selection and reranker must be well-formed;
unknown keys are ignored (but not in a citation's ``locator``, which taguru
closes) and ``kind`` is an open vocabulary (an unknown kind is kept; like an
association it has no locator of its own). An item's ``bytes`` and
``estimated_tokens`` may be absent (taguru's are ``Option``; evaluate never
reads them). Counts are taguru's 64-bit ``usize``/``u64``: up to 2^64−1 is
accepted exactly (the run tables saturate it, :mod:`taguru_eval.tables.flatten`). A package whose
``budget`` is not the budget that was sent, or whose usage exceeds it, is not
the package that was asked for and fails the lane like a malformed one.

From a package: the scoring hits (each item's own locator, then its
``citation_refs``, first ``limit`` of them, score 0.0 and no lanes), the
case's ``budget`` block, the artifact's ``evidence`` block (no payload, no
text) and the ``evidence_items`` rows. A failed call or an unusable package
makes both ``passage`` and ``evidence`` failed, with no budget and no rows.

:func:`retrieve` runs the first lane of every eval case and must-refuse probe:
the passage lane, or this one in its place.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, TypeAlias

import msgspec

from taguru_eval import contract
from taguru_eval._base.structs import validation_detail
from taguru_eval._base.text import truncate_utf8
from taguru_eval._base.wire import U32, U64, over_u64
from taguru_eval.inputs.dataset import CaseOptions
from taguru_eval.options import Budget
from taguru_eval.run.http import CallFailure, TaguruClient
from taguru_eval.run.lanes.answers import AnswerJudge
from taguru_eval.run.lanes.passage import passage_lane
from taguru_eval.run.lanes.record import CallRecorder
from taguru_eval.run.lanes.wire import AssociationMatch, Citation, LanePlan, PassageHit
from taguru_eval.tables.shapes import (
    AnswerCheck,
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


@dataclass(frozen=True, slots=True)
class Assembly:
    """What every evidence call of an ``--assembly`` run sends besides the case:
    the resolved budget (defaults 40/65536/4000 without ``--max-*``) and the
    ``--rerank`` model."""

    budget: Budget
    rerank: str | None = None


class EvidenceRequest(Protocol):
    """What an evidence request is built from: an eval case or a must-refuse case."""

    @property
    def query(self) -> str: ...

    @property
    def cues(self) -> tuple[str, ...]: ...

    @property
    def options(self) -> CaseOptions: ...

    @property
    def effective_limit(self) -> int: ...


def evidence_body(case: EvidenceRequest, assembly: Assembly) -> dict[str, object]:
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

# Like the shared ones (.wire), these structs can never be part of a reference cycle.
# taguru's usize fields (64-bit): msgspec bounds only the sign, since it cannot
# bound beyond int64; decode_package refuses a count over 2^64-1 afterwards.
_USIZE = U64


class _Ref(msgspec.Struct, frozen=True, gc=False):
    source: str
    paragraph: U32


class _LaneRank(msgspec.Struct, frozen=True, gc=False):
    lane: str
    rank: _USIZE


class _CommunityMember(msgspec.Struct, frozen=True, gc=False):
    name: str
    strength: float


class _CommunityHit(msgspec.Struct, frozen=True, gc=False):
    community: str
    score: float
    text: str
    paragraph: U32
    level: _USIZE | None = None
    parent: str | None = None
    concept_count: _USIZE | None = None
    # taguru's Vec with a serde default: absent is empty, null is refused.
    members: list[_CommunityMember] = []
    members_truncated: bool = False


class _Corroboration(msgspec.Struct, frozen=True, gc=False):
    sources: list[str]
    attributions: list[_Ref]


class PackageItem(msgspec.Struct, frozen=True, gc=False):
    """One admitted ``EvidenceItem``; only the locators outlive decoding."""

    candidate_id: str
    kind: str
    fused_rank: _USIZE
    lane_ranks: list[_LaneRank]
    citation_refs: list[_Ref]
    # Option in taguru's EvidenceItem: a package may leave them out (and nothing
    # of evaluate reads them, so an absent one is recorded nowhere).
    bytes: _USIZE | None = None
    estimated_tokens: _USIZE | None = None
    corroboration: _Corroboration | None = None
    contradicts: list[str] = []
    association: AssociationMatch | None = None
    passage: PassageHit | None = None
    community: _CommunityHit | None = None

    @property
    def locator(self) -> tuple[str, int] | None:
        """The item's own ``(source, paragraph)``, from its payload whatever its kind says."""
        if self.passage is not None:
            return self.passage.source, self.passage.paragraph
        if self.community is not None:
            return f"community:{self.community.community}", self.community.paragraph
        return None


class _Locator(msgspec.Struct, frozen=True, gc=False, forbid_unknown_fields=True):
    """A typed citation locator (a page, a slide): taguru refuses any other key."""

    kind: str
    value: str


class _PackageCitation(Citation, frozen=True, gc=False):
    """A package's citation: the shared one with its locator checked, as taguru decodes it."""

    locator: _Locator | None = None


class _CitationEntry(msgspec.Struct, frozen=True, gc=False):
    source: str
    paragraph: U32
    citation: _PackageCitation


class _Limits(msgspec.Struct, frozen=True, gc=False):
    max_items: _USIZE
    max_bytes: _USIZE
    max_tokens: _USIZE


class _Usage(msgspec.Struct, frozen=True, gc=False):
    items_used: _USIZE
    bytes_used: _USIZE
    tokens_used: _USIZE
    limits: _Limits


class Omission(msgspec.Struct, frozen=True, gc=False):
    candidate_id: str
    kind: str
    reason: str
    duplicate_of: str | None = None


class _Lanes(msgspec.Struct, frozen=True, gc=False):
    resolve: LanePlan
    query: LanePlan
    activate: LanePlan
    passages: LanePlan
    communities: LanePlan
    citations: LanePlan


class _Selection(msgspec.Struct, frozen=True, gc=False):
    dedup_dropped: _USIZE
    contradiction_groups: _USIZE
    diversity_tier_width: _USIZE


class _Reranker(msgspec.Struct, frozen=True, gc=False):
    configured: bool
    ran: bool
    model: str | None = None
    reason: str | None = None


class _Plan(msgspec.Struct, frozen=True, gc=False):
    lanes: _Lanes
    selection: _Selection
    reranker: _Reranker


class Package(msgspec.Struct, frozen=True, gc=False):
    """An ``EvidencePackage`` (HTTP.md §6.9), every part typed as taguru types it."""

    items: list[PackageItem]
    citations: list[_CitationEntry]
    budget: _Usage
    omitted: list[Omission]
    omitted_total: _USIZE
    omitted_by_reason: dict[str, _USIZE]
    plan: _Plan


class PackageError(ValueError):
    """An evidence answer evaluate cannot use; ``detail`` goes into :data:`NO_PACKAGE`."""

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


def _check_budget(usage: _Usage, items: int, requested: Budget) -> None:
    """The package must have been assembled under the budget that was sent."""
    limits = msgspec.structs.asdict(usage.limits)
    wanted = requested.to_json()
    if limits != wanted:
        shown = ", ".join(f"{key} {value}" for key, value in wanted.items())
        raise PackageError(f"budget.limits: not the requested budget ({shown})")
    spent = {
        "items_used": (usage.items_used, "max_items"),
        "bytes_used": (usage.bytes_used, "max_bytes"),
        "tokens_used": (usage.tokens_used, "max_tokens"),
    }
    for used, (value, limit) in spent.items():
        # An empty package still reports the fixed overhead of its two empty
        # arrays (HTTP.md §8.1: 4 bytes, 1 token), which a tiny limit is below.
        if value > limits[limit] and usage.items_used > 0:
            raise PackageError(
                f"budget.{used}: {value} exceeds budget.limits.{limit} {limits[limit]}"
            )
    if usage.items_used != items:
        raise PackageError(f"budget.items_used: {usage.items_used} but items holds {items}")


def decode_package(payload: object, requested: Budget) -> Package:
    """The package, or :class:`PackageError` naming the first problem.

    Decoded with msgspec: the field-by-field readers the other lanes use cost
    about ten times as much per package, which a run at high concurrency
    would feel beside the HTTP exchange.
    """
    if isinstance(payload, Package):  # decoded straight from the body (Reply.typed)
        package = payload
    else:
        try:
            package = msgspec.convert(payload, Package)
        except msgspec.ValidationError as exc:
            raise PackageError(validation_detail(exc)) from None
    too_large = over_u64(package)
    if too_large is not None:
        raise PackageError(too_large)
    _check_budget(package.budget, len(package.items), requested)
    return package


def usage(package: Package) -> BudgetUsage:
    """The case's ``budget`` block: the package's usage with its ``omitted_total``."""
    used, limits = package.budget, package.budget.limits
    return BudgetUsage(
        items_used=used.items_used,
        bytes_used=used.bytes_used,
        tokens_used=used.tokens_used,
        limits=BudgetLimits(
            max_items=limits.max_items, max_bytes=limits.max_bytes, max_tokens=limits.max_tokens
        ),
        omitted_total=package.omitted_total,
    )


# --------------------------------------------------------------------------- what a case keeps


def _window(items: list[PackageItem], limit: int) -> list[tuple[str, int, str | None]]:
    """The scoring window: each item's own locator, then its ``citation_refs``; the
    first ``limit``, each with the text only an admitted passage item carries."""
    window: list[tuple[str, int, str | None]] = []
    for item in items:
        own = item.locator
        if own is not None:
            text = item.passage.text if item.passage is not None else None
            window.append((own[0], own[1], text))
        window.extend((ref.source, ref.paragraph, None) for ref in item.citation_refs)
        if len(window) >= limit:
            break
    return window[:limit]


def hits_from_items(items: list[PackageItem], limit: int) -> list[HitLocator]:
    """The scoring hits: each item's own locator, then its ``citation_refs``; the
    first ``limit`` (the case's limit, so both modes score over the same k)."""
    return [
        HitLocator(source=source, paragraph=paragraph, score=0.0, lanes={})
        for source, paragraph, _ in _window(items, limit)
    ]


def _refs(item: PackageItem) -> list[CitationRef]:
    return [CitationRef(source=ref.source, paragraph=ref.paragraph) for ref in item.citation_refs]


def _artifact_item(item: PackageItem) -> EvidenceItem:
    """An admitted item as the artifact lists it (the writer orders the keys)."""
    out = EvidenceItem(
        candidate_id=item.candidate_id,
        kind=item.kind,
        fused_rank=item.fused_rank,
        citation_refs=_refs(item),
    )
    own = item.locator
    if own is not None:
        out["source"], out["paragraph"] = own
    return out


def _reranker(plan: _Reranker) -> RerankerPlan:
    reranker = RerankerPlan(configured=plan.configured, ran=plan.ran)
    if plan.model is not None:
        reranker["model"] = plan.model
    if plan.reason is not None:
        reranker["reason"] = plan.reason
    return reranker


def evidence_block(package: Package, latency_ms: int) -> EvidenceOutcome:
    """The case's ``evidence`` block (§7.4): no payload, no lane ranks, no text."""
    block = EvidenceOutcome(outcome="assembled", latency_ms=latency_ms)
    block["items"] = [_artifact_item(item) for item in package.items]
    if package.omitted_by_reason:
        block["omitted_by_reason"] = dict(sorted(package.omitted_by_reason.items()))
    selection = package.plan.selection
    block["selection"] = EvidenceSelection(
        dedup_dropped=selection.dedup_dropped,
        contradiction_groups=selection.contradiction_groups,
        diversity_tier_width=selection.diversity_tier_width,
    )
    block["reranker"] = _reranker(package.plan.reranker)
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
            lane_ranks=[LaneRank(lane=rank.lane, rank=rank.rank) for rank in item.lane_ranks],
            citation_refs=_refs(item),
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
    answer_checks: list[AnswerCheck] | None = None

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
    client: TaguruClient,
    context: str,
    case: EvidenceRequest,
    assembly: Assembly,
    judge: AnswerJudge | None = None,
) -> EvidenceResult:
    """``POST …/evidence`` for one case; never raises for a server's answer. With a
    ``judge`` the window's passage text is checked for the case's answers."""
    try:
        reply = await client.post(
            ["contexts", context, "evidence"], evidence_body(case, assembly), into=Package
        )
    except CallFailure as failure:
        return _failed(truncate_utf8(failure.message), failure.latency_ms, failure.status)
    try:
        package = decode_package(reply.payload, assembly.budget)
    except PackageError as exc:
        return _failed(NO_PACKAGE.format(detail=exc.detail), reply.latency_ms, reply.status)
    window = _window(package.items, case.effective_limit)
    hits = [
        HitLocator(source=source, paragraph=paragraph, score=0.0, lanes={})
        for source, paragraph, _ in window
    ]
    checks = None if judge is None else judge.check([text for _, _, text in window])
    del window  # the text goes no further
    return EvidenceResult(
        passage=PassageOutcome(outcome="searched", hits=hits, latency_ms=reply.latency_ms),
        evidence=evidence_block(package, reply.latency_ms),
        rows=evidence_rows(package),
        budget=usage(package),
        http_status=reply.status,
        answer_checks=checks,
    )


def _record_call(recorder: CallRecorder, evidence: EvidenceResult) -> None:
    """The one ``calls`` row of an evidence lane call (eval case or must-refuse probe)."""
    recorder.add(
        lane="evidence",
        endpoint=contract.EVIDENCE,
        outcome=evidence.evidence["outcome"],
        latency_ms=evidence.evidence["latency_ms"],
        http_status=evidence.http_status,
        error=evidence.message,
    )


@dataclass(frozen=True)
class Retrieved:
    """What a case's first lane gave: the scoring hits, the budget block (a budgeted
    search's §7.3 usage, or the package's), and the evidence lane's result when it ran."""

    passage: PassageOutcome
    budget: BudgetUsage | None
    evidence: EvidenceResult | None = None
    answer_checks: list[AnswerCheck] | None = None


Retrieval: TypeAlias = Budget | Assembly | None
"""How a case's first lane runs: a plain search (``None``), a search whose hits a
budget truncates client-side (a :class:`Budget`: a baseline run given ``--max-*``,
§7.3), or the evidence lane in its place (an :class:`Assembly`: ``--assembly``, §7.1)."""


async def retrieve(
    client: TaguruClient,
    context: str,
    case: EvidenceRequest,
    recorder: CallRecorder,
    how: Retrieval = None,
    judge: AnswerJudge | None = None,
) -> Retrieved:
    """The first call of an eval case and of a must-refuse probe, as ``how`` says;
    ``judge`` checks an eval case's answers on its window (``--answers``)."""
    if not isinstance(how, Assembly):
        passage, usage, checks = await passage_lane(client, context, case, recorder, how, judge)
        return Retrieved(passage=passage, budget=usage, answer_checks=checks)
    evidence = await evidence_lane(client, context, case, how, judge)
    _record_call(recorder, evidence)
    return Retrieved(
        passage=evidence.passage,
        budget=evidence.budget,
        evidence=evidence,
        answer_checks=evidence.answer_checks,
    )

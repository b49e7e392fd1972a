"""The passage lane (EVALUATE.md §3.4): one ``POST …/sources/search`` per case.

The answer is read as taguru's typed ``SearchPage`` (plan + hits, every hit
with its text and lane evidence); a page that does not fit it falls back to
the tolerant shape (a bare hit array, or an object whose ``hits`` is one),
which keeps no plan and no lane evidence. With a budget (``--max-*`` in a
baseline run) the hits are truncated as the server would (§7.3) before
they are projected to locators: the text is measured, then dropped.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import Protocol

import msgspec

from taguru_eval import contract
from taguru_eval._base import jsonstrict as js
from taguru_eval._base.text import to_f32, to_f32_all, truncate_utf8
from taguru_eval._base.wire import F32, U64, Prose
from taguru_eval.inputs.dataset import CaseOptions
from taguru_eval.options import Budget
from taguru_eval.run.http import CallFailure, TaguruClient
from taguru_eval.run.lanes import wire
from taguru_eval.run.lanes.answers import AnswerJudge
from taguru_eval.run.lanes.budget import MeasuredHit, truncate
from taguru_eval.run.lanes.record import CallRecorder
from taguru_eval.tables import shapes
from taguru_eval.tables.shapes import (
    AnswerCheck,
    BudgetLimits,
    BudgetUsage,
    HitLocator,
    LanePlan,
    PassageOutcome,
    Plan,
    PlanFilter,
)

NO_HITS_MESSAGE = "response carries no recognizable hits (plan/hits shape mismatch)"


# --------------------------------------------------------------------------- the SearchPage


class _LanePlan(msgspec.Struct, frozen=True, gc=False):
    ran: bool
    reason: Prose | None = None  # server prose the artifact keeps: the client redacts it
    floor: F32 | None = None


class _PlanLanes(msgspec.Struct, frozen=True, gc=False):
    bm25: _LanePlan
    vector: _LanePlan


class _PlanFilter(msgspec.Struct, frozen=True, gc=False):
    eligible_sources: U64
    total_sources: U64


class _ContextPlan(msgspec.Struct, frozen=True, gc=False):
    context: str
    lanes: _PlanLanes
    filter: _PlanFilter | None = None


class _SearchPlan(msgspec.Struct, frozen=True, gc=False):
    contexts: list[_ContextPlan]


class _SearchPage(msgspec.Struct, frozen=True, gc=False):
    plan: _SearchPlan
    hits: list[wire.PassageHit]


class _ShapeError(ValueError):
    """A payload that does not fit even the tolerant shape (fixed message)."""


# --------------------------------------------------------------------------- the lane


class SearchRequest(Protocol):
    """What a passage search is built from: an eval case or a must-refuse case."""

    @property
    def query(self) -> str: ...

    @property
    def options(self) -> CaseOptions: ...

    @property
    def effective_limit(self) -> int: ...


def search_body(case: SearchRequest) -> dict[str, object]:
    """The baseline search request body (EVALUATE.md §3.4); absent options are null."""
    options = case.options
    return {
        "limit": case.effective_limit,
        "query": case.query,
        "semantic_floor": options.floor,
        "since": options.since,
        "tags": list(options.tags),
        "until": options.until,
    }


async def passage_lane(
    client: TaguruClient,
    context: str,
    case: SearchRequest,
    recorder: CallRecorder,
    budget: Budget | None = None,
    judge: AnswerJudge | None = None,
) -> tuple[PassageOutcome, BudgetUsage | None, list[AnswerCheck] | None]:
    """``POST …/sources/search``, hit extraction (typed shape, then fallback) and,
    when a budget was given, the §7.3 truncation before projection to locators.

    With a ``judge`` (``--answers``) the served hits' text is checked for the
    case's answers before it is dropped; a failed lane has no verdicts."""
    try:
        reply = await client.post(
            ["contexts", context, "sources", "search"], search_body(case), into=_SearchPage
        )
    except CallFailure as failure:
        message = truncate_utf8(failure.message)
        return _failed(recorder, message, failure.latency_ms, failure.status), None, None
    page: object = reply.payload
    if not reply.typed:
        with contextlib.suppress(CallFailure):  # else the tolerant shape
            page = client.payload_as(reply, _SearchPage, "search")
    usage: BudgetUsage | None = None
    checks: list[AnswerCheck] | None = None
    if isinstance(page, _SearchPage) and budget is None and judge is None:
        # The common case: nothing reads the text, the locators come straight from the page.
        plan = _plan(page.plan.contexts[0]) if page.plan.contexts else None
        hits = hit_locators(page.hits)
    else:
        try:
            plan, served = extract_served_hits(page)
        except _ShapeError as exc:
            return _failed(recorder, str(exc), reply.latency_ms, reply.status), None, None
        if budget is not None:
            served, usage = apply_budget(context, served, budget)
        checks = None if judge is None else judge.check([hit.text for hit in served])
        hits = [locator(hit) for hit in served]
        del served  # the text goes no further
    recorder.add(
        lane="passage",
        endpoint=contract.SEARCH,
        outcome="searched",
        latency_ms=reply.latency_ms,
        http_status=reply.status,
    )
    outcome: PassageOutcome
    if plan is None:
        outcome = {"outcome": "searched", "hits": hits, "latency_ms": reply.latency_ms}
    else:
        outcome = {
            "outcome": "searched",
            "plan": plan,
            "hits": hits,
            "latency_ms": reply.latency_ms,
        }
    return outcome, usage, checks


def _failed(
    recorder: CallRecorder, message: str, latency_ms: int, status: int | None
) -> PassageOutcome:
    recorder.add(
        lane="passage",
        endpoint=contract.SEARCH,
        outcome="failed",
        latency_ms=latency_ms,
        http_status=status,
        error=message,
    )
    return PassageOutcome(outcome="failed", message=message, latency_ms=latency_ms)


def extract_served_hits(payload: object) -> tuple[Plan | None, list[MeasuredHit]]:
    """(plan, hits with their text) of a search payload: a decoded ``SearchPage``
    (the client's reply, :meth:`~taguru_eval.run.http.TaguruClient.payload_as`),
    else the tolerant shape; raises on no recognizable hits.

    The text is needed only by a budget (§7.3) or an answers judge; :func:`locator` drops it.
    """
    if not isinstance(payload, _SearchPage):
        return None, _fallback_hits(payload)
    plans = payload.plan.contexts
    hits = [_measured(hit) for hit in payload.hits]
    return (_plan(plans[0]) if plans else None), hits


def _measured(hit: wire.PassageHit) -> MeasuredHit:
    lanes: dict[str, shapes.LaneScore] = {}
    for name, score in (("bm25", hit.lanes.bm25), ("vector", hit.lanes.vector)):
        if score is not None:
            lanes[name] = shapes.LaneScore(rank=score.rank, score=to_f32(score.score))
    return MeasuredHit(
        source=hit.source,
        paragraph=hit.paragraph,
        score=to_f32(hit.score),
        text=hit.text,
        lanes=lanes,
    )


def _lane_plan(lane: _LanePlan) -> LanePlan:
    plan = LanePlan(ran=lane.ran)
    if lane.reason is not None:
        plan["reason"] = str(lane.reason)  # redacted by the client; a plain str to write
    if lane.floor is not None:
        plan["floor"] = to_f32(lane.floor)
    return plan


def _plan(context: _ContextPlan) -> Plan:
    plan = Plan(
        context=context.context,
        lanes={
            "bm25": _lane_plan(context.lanes.bm25),
            "vector": _lane_plan(context.lanes.vector),
        },
    )
    if context.filter is not None:
        plan["filter"] = PlanFilter(
            eligible_sources=context.filter.eligible_sources,
            total_sources=context.filter.total_sources,
        )
    return plan


def _fallback_hits(payload: object) -> list[MeasuredHit]:
    """The tolerant shape: a bare hit array, or an object whose ``hits`` is one."""
    if isinstance(payload, list):
        raw_hits: list[object] = payload
    elif isinstance(payload, dict) and isinstance(payload.get("hits"), list):
        raw_hits = payload["hits"]
    else:
        raise _ShapeError(NO_HITS_MESSAGE)
    hits: list[MeasuredHit] = []
    for raw in raw_hits:
        hit = raw if isinstance(raw, dict) else {}
        source = hit.get("source")
        if not isinstance(source, str):
            raise _ShapeError("a hit is missing 'source'")
        paragraph = hit.get("paragraph")
        if isinstance(paragraph, bool) or not isinstance(paragraph, int) or paragraph < 0:
            raise _ShapeError("a hit is missing 'paragraph'")
        score = hit.get("score")
        numeric = isinstance(score, int | float) and not isinstance(score, bool)
        text = hit.get("text")
        hits.append(
            MeasuredHit(
                source=source,
                paragraph=paragraph % (2**32),
                score=_f32_or_zero(score) if numeric else 0.0,
                text=text if isinstance(text, str) else "",
                lanes={},
            )
        )
    return hits


def _f32_or_zero(value: object) -> float:
    try:
        return js.read_f32(value, ())
    except js.JsonShapeError:
        return 0.0


def hit_locators(hits: Sequence[wire.PassageHit]) -> list[HitLocator]:
    """The artifact's view of a page's hits, straight from the decoded page: what
    :func:`locator` makes of each :func:`_measured` hit, every score rounded to
    binary32 in one pass."""
    scores: list[float] = []
    for hit in hits:
        scores.append(hit.score)
        if hit.lanes.bm25 is not None:
            scores.append(hit.lanes.bm25.score)
        if hit.lanes.vector is not None:
            scores.append(hit.lanes.vector.score)
    rounded = iter(to_f32_all(scores))
    located: list[HitLocator] = []
    for hit in hits:
        score = next(rounded)
        lanes = shapes.HitLanes()
        bm25, vector = hit.lanes.bm25, hit.lanes.vector
        if bm25 is not None:
            lanes["bm25"] = shapes.LaneScore(rank=bm25.rank, score=next(rounded))
        if vector is not None:
            lanes["vector"] = shapes.LaneScore(rank=vector.rank, score=next(rounded))
        located.append(
            HitLocator(source=hit.source, paragraph=hit.paragraph, score=score, lanes=lanes)
        )
    return located


def locator(hit: MeasuredHit) -> HitLocator:
    """The artifact's view of a hit: everything but its text."""
    lanes = shapes.HitLanes()
    for lane in ("bm25", "vector"):
        score = hit.lanes.get(lane)
        if score is not None:
            lanes[lane] = shapes.LaneScore(rank=score["rank"], score=score["score"])
    return HitLocator(source=hit.source, paragraph=hit.paragraph, score=hit.score, lanes=lanes)


def apply_budget(
    context: str, hits: list[MeasuredHit], budget: Budget
) -> tuple[list[MeasuredHit], BudgetUsage]:
    """§7.3: the hits a budget admits (server order kept) and the usage block."""
    result = truncate(context, hits, budget.max_items, budget.max_bytes, budget.max_tokens)
    usage = BudgetUsage(
        items_used=result.items_used,
        bytes_used=result.bytes_used,
        tokens_used=result.tokens_used,
        limits=BudgetLimits(
            max_items=budget.max_items, max_bytes=budget.max_bytes, max_tokens=budget.max_tokens
        ),
        omitted_total=result.omitted_total,
    )
    return [hits[index] for index in result.kept], usage

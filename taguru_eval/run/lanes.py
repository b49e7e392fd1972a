"""The per-case lanes of run mode (EVALUATE.md §3.3–§3.6).

One case = the passage lane, then (when declared) the structural lane —
coverage cues, then association probes — then the served set, then the
citation lane. Every HTTP call becomes one :class:`CallRecord`; the lane
results are evaluation.json's own shapes (F's ``tables`` TypedDicts). Body
text is read only where a check needs it (the quote check) and never kept.

Nothing here computes a metric: the scorer reads the :class:`LaneOutput`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol

from taguru_eval import contract
from taguru_eval._base import jsonstrict as js
from taguru_eval._base.text import truncate_utf8
from taguru_eval.contract import RESOLVE_LIMIT
from taguru_eval.inputs.dataset import Absent, CaseOptions, EvalCase, ExpectedCitation
from taguru_eval.options import Budget
from taguru_eval.run.budget import MeasuredHit, truncate
from taguru_eval.run.checks import citation_check, served_set
from taguru_eval.run.client import CallFailure, Reply, TaguruClient
from taguru_eval.run.evidence import Assembly, EvidenceResult, evidence_lane
from taguru_eval.tables.shapes import (
    AssociationProbe,
    AssociationQuery,
    Attribution,
    BudgetLimits,
    BudgetUsage,
    CallRecord,
    CitationCheck,
    CueResolution,
    HitLanes,
    HitLocator,
    LaneOutput,
    LanePlan,
    LaneScore,
    PassageOutcome,
    Plan,
    PlanFilter,
    PositionOutcome,
    Structural,
)

NO_HITS_MESSAGE = "response carries no recognizable hits (plan/hits shape mismatch)"


Lane = Literal["passage", "evidence", "coverage", "association", "citation", "structural"]
"""A call's lane; ``structural`` is a must-refuse cue probe (:mod:`.probes`)."""


class _ShapeError(ValueError):
    """A payload that does not fit the shape a lane reads (fixed message)."""


@dataclass
class CallRecorder:
    """Collects one case's call records in call order (the must-refuse probes
    record theirs the same way)."""

    case_index: int
    case_id: str
    calls: list[CallRecord] = field(default_factory=list)

    def add(
        self,
        *,
        lane: Lane,
        endpoint: str,
        outcome: str,
        latency_ms: int,
        http_status: int | None,
        item_index: int | None = None,
        position: str | None = None,
        error: str | None = None,
    ) -> None:
        self.calls.append(
            CallRecord(
                case_index=self.case_index,
                case_id=self.case_id,
                seq=len(self.calls),
                lane=lane,
                endpoint=endpoint,
                item_index=item_index,
                position=position,
                outcome=outcome,
                http_status=http_status,
                latency_ms=latency_ms,
                error=None if error is None else truncate_utf8(error),
            )
        )


# --------------------------------------------------------------------------- the case


async def run_case(
    client: TaguruClient,
    context: str,
    case_index: int,
    case: EvalCase,
    budget: Budget | None = None,
    assembly: Assembly | None = None,
) -> LaneOutput:
    """All lanes of one case, in the documented order; never raises for a lane failure.

    ``budget`` (baseline runs given ``--max-*``) truncates the passage hits (§7.3);
    ``assembly`` (``--assembly`` runs) replaces the passage lane with the evidence lane.
    """
    recorder = CallRecorder(case_index, case.case_id)
    evidence: EvidenceResult | None = None
    if assembly is None:
        passage, usage = await passage_lane(client, context, case, recorder, budget)
    else:
        evidence = await evidence_lane(client, context, case, assembly)
        record_evidence_call(recorder, evidence)
        passage, usage = evidence.passage, evidence.budget
    structural = (
        await structural_lane(client, context, case, recorder)
        if case.runs_structural_lane
        else None
    )
    served = served_set(passage, structural)
    checks = await citation_lane(client, context, case.expected_citations, served, recorder)
    output = LaneOutput(
        case_index=case_index,
        case_id=case.case_id,
        query=case.query,
        cues=list(case.cues),
        limit=case.effective_limit,
        tags=list(case.options.tags),
        passage=passage,
        checks=checks,
        calls=recorder.calls,
    )
    if structural is not None:
        output["structural"] = structural
    if evidence is not None:
        output["evidence"] = evidence.evidence
        output["evidence_rows"] = evidence.rows
    if usage is not None:
        output["budget"] = usage
    return output


def record_evidence_call(recorder: CallRecorder, evidence: EvidenceResult) -> None:
    """The one ``calls`` row of an evidence lane call (eval case or must-refuse probe)."""
    recorder.add(
        lane="evidence",
        endpoint=contract.EVIDENCE,
        outcome=evidence.evidence["outcome"],
        latency_ms=evidence.evidence["latency_ms"],
        http_status=evidence.http_status,
        error=evidence.message,
    )


# --------------------------------------------------------------------------- passage lane


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
) -> tuple[PassageOutcome, BudgetUsage | None]:
    """``POST …/sources/search``, hit extraction (typed shape, then fallback) and,
    when a budget was given, the §7.3 truncation before projection to locators."""
    try:
        reply = await client.post(["contexts", context, "sources", "search"], search_body(case))
    except CallFailure as failure:
        message = truncate_utf8(failure.message)
        recorder.add(
            lane="passage",
            endpoint=contract.SEARCH,
            outcome="failed",
            latency_ms=failure.latency_ms,
            http_status=failure.status,
            error=message,
        )
        failed = PassageOutcome(outcome="failed", message=message, latency_ms=failure.latency_ms)
        return failed, None
    try:
        plan, served = extract_served_hits(reply.payload)
    except _ShapeError as exc:
        recorder.add(
            lane="passage",
            endpoint=contract.SEARCH,
            outcome="failed",
            latency_ms=reply.latency_ms,
            http_status=reply.status,
            error=str(exc),
        )
        failed = PassageOutcome(outcome="failed", message=str(exc), latency_ms=reply.latency_ms)
        return failed, None
    if plan is not None:
        _redact_reasons(plan, client.redact)
    usage: BudgetUsage | None = None
    if budget is not None:
        served, usage = apply_budget(context, served, budget)
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
    return outcome, usage


def extract_served_hits(payload: object) -> tuple[Plan | None, list[MeasuredHit]]:
    """(plan, hits with their text) from a search payload; raises on no recognizable hits.

    The text is needed only by a budget (§7.3); :func:`locator` drops it.
    """
    try:
        return _typed_page(payload)
    except js.JsonShapeError:
        return None, _fallback_hits(payload)


def _redact_reasons(plan: Plan, redact: Callable[[str], str]) -> None:
    """A lane plan's ``reason`` is server prose kept in the artifact: redact it in place."""
    for lane_plan in (plan["lanes"]["bm25"], plan["lanes"]["vector"]):
        reason = lane_plan.get("reason")
        if reason is not None:
            lane_plan["reason"] = redact(reason)


def locator(hit: MeasuredHit) -> HitLocator:
    """The artifact's view of a hit: everything but its text."""
    lanes = HitLanes()
    for lane in ("bm25", "vector"):
        score = hit.lanes.get(lane)
        if score is not None:
            lanes[lane] = LaneScore(rank=score["rank"], score=score["score"])
    return HitLocator(source=hit.source, paragraph=hit.paragraph, score=hit.score, lanes=lanes)


def extract_hits(payload: object) -> tuple[Plan | None, list[HitLocator]]:
    """(plan, hits without text) from a search payload; raises on no recognizable hits."""
    plan, hits = extract_served_hits(payload)
    return plan, [locator(hit) for hit in hits]


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


def _typed_page(payload: object) -> tuple[Plan | None, list[MeasuredHit]]:
    page = js.read_object(payload, ())
    if "plan" not in page:
        raise js.JsonShapeError(("plan",), "missing field `plan`")
    plan_obj = js.read_object(page["plan"], ("plan",))
    if "contexts" not in plan_obj:
        raise js.JsonShapeError(("plan", "contexts"), "missing field `contexts`")
    plans = js.read_array(plan_obj["contexts"], ("plan", "contexts"), _read_plan)
    if "hits" not in page:
        raise js.JsonShapeError(("hits",), "missing field `hits`")
    hits = js.read_array(page["hits"], ("hits",), _read_typed_hit)
    return (plans[0] if plans else None), hits


def _require(obj: Mapping[str, object], key: str, path: js.JsonPath) -> object:
    if key not in obj:
        raise js.JsonShapeError(path, f"missing field `{key}`")
    return obj[key]


def _read_lane_plan(value: object, path: js.JsonPath) -> LanePlan:
    obj = js.read_object(value, path)
    plan = LanePlan(ran=js.read_bool(_require(obj, "ran", path), (*path, "ran")))
    reason = obj.get("reason")
    if reason is not None:
        plan["reason"] = js.read_str(reason, (*path, "reason"))
    floor = obj.get("floor")
    if floor is not None:
        plan["floor"] = js.read_f32(floor, (*path, "floor"))
    return plan


def _read_plan(value: object, path: js.JsonPath) -> Plan:
    obj = js.read_object(value, path)
    context = js.read_str(_require(obj, "context", path), (*path, "context"))
    lanes_path = (*path, "lanes")
    lanes = js.read_object(_require(obj, "lanes", path), lanes_path)
    plan = Plan(
        context=context,
        lanes={
            "bm25": _read_lane_plan(_require(lanes, "bm25", lanes_path), (*lanes_path, "bm25")),
            "vector": _read_lane_plan(
                _require(lanes, "vector", lanes_path), (*lanes_path, "vector")
            ),
        },
    )
    raw_filter = obj.get("filter")
    if raw_filter is not None:
        fpath = (*path, "filter")
        fobj = js.read_object(raw_filter, fpath)
        plan["filter"] = PlanFilter(
            eligible_sources=js.read_u64(
                _require(fobj, "eligible_sources", fpath), (*fpath, "eligible_sources")
            ),
            total_sources=js.read_u64(
                _require(fobj, "total_sources", fpath), (*fpath, "total_sources")
            ),
        )
    return plan


def _read_lane_score(value: object, path: js.JsonPath) -> LaneScore:
    obj = js.read_object(value, path)
    return LaneScore(
        rank=js.read_u64(_require(obj, "rank", path), (*path, "rank")),
        score=js.read_f32(_require(obj, "score", path), (*path, "score")),
    )


def _read_typed_hit(value: object, path: js.JsonPath) -> MeasuredHit:
    obj = js.read_object(value, path)
    source = js.read_str(_require(obj, "source", path), (*path, "source"))
    paragraph = js.read_u32(_require(obj, "paragraph", path), (*path, "paragraph"))
    score = js.read_f32(_require(obj, "score", path), (*path, "score"))
    # `text` must be there for the typed shape (§3.4); only a budget measures it.
    text = js.read_str(_require(obj, "text", path), (*path, "text"))
    lanes: dict[str, LaneScore] = {}
    # `lanes` is required and must be an object (taguru's PassageHit has no serde
    # default there): one hit without it sends the whole page to the fallback,
    # which keeps no plan and no lane evidence for any hit (§3.4). Inside it a
    # lane may be absent or null.
    lanes_path = (*path, "lanes")
    lanes_obj = js.read_object(_require(obj, "lanes", path), lanes_path)
    for lane in ("bm25", "vector"):
        raw = lanes_obj.get(lane)
        if raw is not None:
            lanes[lane] = _read_lane_score(raw, (*lanes_path, lane))
    return MeasuredHit(source=source, paragraph=paragraph, score=score, text=text, lanes=lanes)


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


def diversity_sources(passage: PassageOutcome) -> int | None:
    """Distinct sources among the hits of a searched passage; None when it failed."""
    if passage["outcome"] != "searched":
        return None
    return len({hit["source"] for hit in passage.get("hits", [])})


# --------------------------------------------------------------------------- structural lane


@dataclass(frozen=True, slots=True)
class Candidate:
    """One resolved name: its tier and, when the server says, its match kind."""

    name: str
    tier: str
    kind: str | None = None


def _read_candidates(payload: object) -> list[Candidate]:
    def one(value: object, path: js.JsonPath) -> Candidate:
        obj = js.read_object(value, path)
        name = js.read_str(_require(obj, "name", path), (*path, "name"))
        js.read_f64(_require(obj, "score", path), (*path, "score"))
        tier = js.read_str(_require(obj, "tier", path), (*path, "tier"))
        kind = js.read_optional(obj.get("kind"), (*path, "kind"), js.read_str)
        return Candidate(name, tier, kind)

    return js.read_array(payload, (), one)


def top_tier(candidates: Sequence[Candidate]) -> tuple[str | None, list[str]]:
    """The lexical group if any candidate is lexical, else the semantic group."""
    for tier in ("lexical", "semantic"):
        names = [c.name for c in candidates if c.tier == tier]
        if names:
            return tier, names
    return None, []


def classify_position(tier: str | None, names: Sequence[str], latency_ms: int) -> PositionOutcome:
    """An association position's outcome from its top tier (EVALUATE.md §3.5).

    No candidate is ``not_found``, exactly one is ``resolved`` (the only case
    whose name may be queried), two or more are ``ambiguous`` — never guessed.
    """
    if not names:
        return PositionOutcome(outcome="not_found", latency_ms=latency_ms)
    if len(names) == 1:
        return {
            "outcome": "resolved",
            "name": names[0],
            "tier": tier or "",
            "latency_ms": latency_ms,
        }
    return {
        "outcome": "ambiguous",
        "tier": tier or "",
        "candidates": list(names),
        "latency_ms": latency_ms,
    }


async def resolve_call(
    client: TaguruClient, context: str, route: Literal["resolve", "resolve_label"], cue: str
) -> tuple[Reply | CallFailure, list[Candidate] | None]:
    """One ``{cue, limit: 5}`` resolve call: (the reply, every candidate), or
    (the failure, None) — a response that does not parse is a failure naming
    the route."""
    try:
        reply = await client.post(
            ["contexts", context, route], {"cue": cue, "limit": RESOLVE_LIMIT}
        )
    except CallFailure as failure:
        return failure, None
    try:
        return reply, _read_candidates(reply.payload)
    except js.JsonShapeError as exc:
        parse_failure = CallFailure(
            client.redact(f"{route} response did not parse: {exc.detail}"),
            status=reply.status,
            latency_ms=reply.latency_ms,
        )
        return parse_failure, None


async def _resolve(
    client: TaguruClient, context: str, route: Literal["resolve", "resolve_label"], cue: str
) -> tuple[Reply | CallFailure, tuple[str | None, list[str]] | None]:
    """One resolve call: (the reply or failure, the top tier or None on a parse failure)."""
    result, candidates = await resolve_call(client, context, route, cue)
    return result, None if candidates is None else top_tier(candidates)


def record_failure(
    recorder: CallRecorder,
    failure: CallFailure,
    lane: Literal["coverage", "association", "structural"],
    endpoint: str,
    item_index: int,
    position: str | None = None,
) -> str:
    """Record a failed resolve call as ``errored``; returns its truncated message."""
    message = truncate_utf8(failure.message)
    recorder.add(
        lane=lane,
        endpoint=endpoint,
        item_index=item_index,
        position=position,
        outcome="errored",
        latency_ms=failure.latency_ms,
        http_status=failure.status,
        error=message,
    )
    return message


async def structural_lane(
    client: TaguruClient, context: str, case: EvalCase, recorder: CallRecorder
) -> Structural:
    """Coverage cues (concepts, then labels), then association probes (§3.5)."""
    cue_list = list(case.cues) if case.cues else [case.query]
    resolutions: list[CueResolution] = []
    plans: list[tuple[Literal["concept", "label"], Literal["resolve", "resolve_label"]]] = []
    if case.expected_concepts:
        plans.append(("concept", "resolve"))
    if case.expected_labels:
        plans.append(("label", "resolve_label"))
    for kind, route in plans:
        endpoint = contract.RESOLVE if route == "resolve" else contract.RESOLVE_LABEL
        for cue in cue_list:
            result, tier = await _resolve(client, context, route, cue)
            cue_index = len(resolutions)
            if isinstance(result, CallFailure) or tier is None:
                failure = result if isinstance(result, CallFailure) else CallFailure("")
                message = record_failure(recorder, failure, "coverage", endpoint, cue_index)
                resolutions.append(
                    CueResolution(
                        cue=cue,
                        kind=kind,
                        resolved_names=[],
                        limit=RESOLVE_LIMIT,
                        latency_ms=failure.latency_ms,
                        error=message,
                    )
                )
                continue
            tier_name, names = tier
            recorder.add(
                lane="coverage",
                endpoint=endpoint,
                item_index=cue_index,
                outcome="resolved" if names else "not_found",
                latency_ms=result.latency_ms,
                http_status=result.status,
            )
            resolution: CueResolution
            if tier_name is None:
                resolution = {
                    "cue": cue,
                    "kind": kind,
                    "resolved_names": names,
                    "limit": RESOLVE_LIMIT,
                    "latency_ms": result.latency_ms,
                }
            else:
                resolution = {
                    "cue": cue,
                    "kind": kind,
                    "resolved_names": names,
                    "tier": tier_name,
                    "limit": RESOLVE_LIMIT,
                    "latency_ms": result.latency_ms,
                }
            resolutions.append(resolution)

    probes: list[AssociationProbe] = []
    for index, expected in enumerate(case.expected_associations):
        positions: dict[str, PositionOutcome] = {}
        for position, route, cue in (
            ("subject", "resolve", expected.subject),
            ("label", "resolve_label", expected.label),
            ("object", "resolve", expected.object),
        ):
            outcome = await _probe_position(
                client,
                context,
                route,
                cue,
                index,
                position,
                recorder,
            )
            positions[position] = outcome
        probe = AssociationProbe(
            subject_cue=expected.subject,
            label_cue=expected.label,
            object_cue=expected.object,
            subject=positions["subject"],
            label=positions["label"],
            object=positions["object"],
        )
        if all(p["outcome"] == "resolved" for p in positions.values()):
            probe["query"] = await _query(
                client,
                context,
                positions["subject"]["name"],
                positions["label"]["name"],
                positions["object"]["name"],
                index,
                recorder,
            )
        probes.append(probe)
    return Structural(cues=resolutions, associations=probes)


async def _probe_position(
    client: TaguruClient,
    context: str,
    route: Literal["resolve", "resolve_label"],
    cue: str,
    index: int,
    position: str,
    recorder: CallRecorder,
) -> PositionOutcome:
    endpoint = contract.RESOLVE if route == "resolve" else contract.RESOLVE_LABEL
    result, tier = await _resolve(client, context, route, cue)
    if isinstance(result, CallFailure) or tier is None:
        failure = result if isinstance(result, CallFailure) else CallFailure("")
        message = record_failure(recorder, failure, "association", endpoint, index, position)
        return PositionOutcome(outcome="errored", message=message, latency_ms=failure.latency_ms)
    latency = result.latency_ms
    outcome = classify_position(*tier, latency)
    recorder.add(
        lane="association",
        endpoint=endpoint,
        item_index=index,
        position=position,
        outcome=outcome["outcome"],
        latency_ms=latency,
        http_status=result.status,
    )
    return outcome


def _read_attributions(payload: object) -> tuple[int, int, list[Attribution]]:
    """(total, number of matches, every attribution locator) of a MatchPage."""
    page = js.read_object(payload, ())
    total = js.read_u64(_require(page, "total", ()), ("total",))
    attributions: list[Attribution] = []

    def one_attribution(value: object, path: js.JsonPath) -> None:
        obj = js.read_object(value, path)
        source = js.read_str(_require(obj, "source", path), (*path, "source"))
        js.read_f64(_require(obj, "weight", path), (*path, "weight"))
        js.read_u64(_require(obj, "count", path), (*path, "count"))
        paragraph = js.read_optional(obj.get("paragraph"), (*path, "paragraph"), js.read_u32)
        section = obj.get("section")
        if section is not None:
            js.read_str(section, (*path, "section"))
        attributions.append(Attribution(source=source, paragraph=paragraph))

    def one_match(value: object, path: js.JsonPath) -> None:
        obj = js.read_object(value, path)
        for key in ("subject", "label", "object"):
            js.read_str(_require(obj, key, path), (*path, key))
        js.read_f64(_require(obj, "weight", path), (*path, "weight"))
        js.read_u64(_require(obj, "count", path), (*path, "count"))
        js.read_array(_require(obj, "attributions", path), (*path, "attributions"), one_attribution)

    matches = js.read_array(_require(page, "matches", ()), ("matches",), one_match)
    return total, len(matches), attributions


async def _query(
    client: TaguruClient,
    context: str,
    subject: str,
    label: str,
    obj: str,
    index: int,
    recorder: CallRecorder,
) -> AssociationQuery:
    body: dict[str, object] = {"label": label, "limit": 1, "object": obj, "subject": subject}
    try:
        reply = await client.post(["contexts", context, "query"], body)
        total, matches, attributions = _read_attributions(reply.payload)
    except (CallFailure, js.JsonShapeError) as exc:
        failure = (
            exc
            if isinstance(exc, CallFailure)
            else CallFailure(
                client.redact(f"query response did not parse: {exc.detail}"),
                status=reply.status,
                latency_ms=reply.latency_ms,
            )
        )
        message = record_failure(recorder, failure, "association", contract.QUERY, index, "query")
        return AssociationQuery(outcome="errored", message=message, latency_ms=failure.latency_ms)
    recorder.add(
        lane="association",
        endpoint=contract.QUERY,
        item_index=index,
        position="query",
        outcome="queried",
        latency_ms=reply.latency_ms,
        http_status=reply.status,
    )
    if not attributions:
        return {
            "outcome": "queried",
            "total": total,
            "matches": matches,
            "latency_ms": reply.latency_ms,
        }
    return {
        "outcome": "queried",
        "total": total,
        "matches": matches,
        "attributions": attributions,
        "latency_ms": reply.latency_ms,
    }


# --------------------------------------------------------------------------- served set + citations


async def citation_lane(
    client: TaguruClient,
    context: str,
    citations: Sequence[ExpectedCitation],
    served: set[tuple[str, int]],
    recorder: CallRecorder,
) -> list[CitationCheck]:
    """One ``POST …/citations`` per expected citation, in order (§3.6)."""
    checks: list[CitationCheck] = []
    for index, expected in enumerate(citations):
        checks.append(await _check_citation(client, context, index, expected, served, recorder))
    return checks


async def _check_citation(
    client: TaguruClient,
    context: str,
    index: int,
    expected: ExpectedCitation,
    served: set[tuple[str, int]],
    recorder: CallRecorder,
) -> CitationCheck:
    body: dict[str, object] = {"paragraph": expected.paragraph, "source": expected.source}
    response: dict[str, object]
    try:
        reply = await client.post(["contexts", context, "citations"], body)
    except CallFailure as failure:
        status, latency = failure.status, failure.latency_ms
        response = {"status": status, "code": failure.code, "message": failure.message}
    else:
        status, latency = reply.status, reply.latency_ms
        response = {"status": 200, "body": reply.payload}
    check = citation_check(
        source=expected.source,
        paragraph=expected.paragraph,
        section_expected_present=expected.section_declared,
        section_expected=None if isinstance(expected.section, Absent) else expected.section,
        quote=expected.quote,
        served=(expected.source, expected.paragraph) in served,
        response=response,
        latency_ms=latency,
        redact=client.redact,
    )
    recorder.add(
        lane="citation",
        endpoint=contract.CITATIONS,
        item_index=index,
        outcome=check["outcome"],
        latency_ms=latency,
        http_status=status,
        error=check.get("message"),
    )
    return check

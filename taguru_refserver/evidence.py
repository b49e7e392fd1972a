"""``POST /contexts/{name}/evidence``: evidence assembly (HTTP.md §6.9, §9.10).

One request fans out to the lanes the single-purpose routes serve, through
the same code: each origin is resolved (``graph_reads.resolve_candidates``)
and its top candidate becomes an anchor; the query lane runs only when
``labels`` are given (``graph_reads.matching_edges``, first 100 matches);
spreading activation always runs from the anchors (``activate.py``); the
passage lane is the ordinary passage search (``passage_search.py``) over
``text_fallback_query`` or the origins joined by ``"; "``; every located
attribution of an association candidate is looked up as a citation. The
pool is fused (``fusion.py``) and selected under the budget
(``selection.py``), with the toy reranker (``rerank.py``) when requested.

Communities are never built by this server, so ``include_communities``
always degrades with the reference's "no communities artifact" reason — or
is refused (403) for a key whose grant does not name the derived
``{name}::communities`` context.

Usage counts as taguru counts it: every lane that reads the context is a
read of its own — one per origin resolved, the query lane when it runs, the
activate lane when it runs, and the passage search — each empty when it found
nothing; the citation lookups are not counted.
"""

from __future__ import annotations

from dataclasses import dataclass

from taguru_refserver.activate import DEFAULT_DECAY, activate_page
from taguru_refserver.envelope import ApiError
from taguru_refserver.fusion import (
    EvidenceCandidate,
    FusedCandidate,
    Locator,
    association_candidate,
    fuse,
    passage_candidate,
)
from taguru_refserver.graph_reads import (
    association_out,
    citation,
    matching_edges,
    resolve_candidates,
)
from taguru_refserver.model import ContextState
from taguru_refserver.passage_search import DEFAULT_SEARCH_LIMIT, search_passages
from taguru_refserver.rerank import RerankOutcome, not_requested, rerank
from taguru_refserver.routes_bodies import Fields, over_limit, type_error
from taguru_refserver.routes_common import Call, RouteSpec
from taguru_refserver.routes_read import MAX_LIST_ITEMS, MAX_MATCH_LIMIT
from taguru_refserver.selection import BudgetLimits, select

MAX_EVIDENCE_SEARCH_LIMIT = 200
DEFAULT_ACTIVATE_LIMIT = 20
QUERY_LANE_PAGE = 100  # the query lane takes one default page of matches
DEFAULT_MAX_ITEMS = 40
DEFAULT_MAX_BYTES = 65536
DEFAULT_MAX_TOKENS = 4000
CEILING_MAX_ITEMS = 1000
CEILING_MAX_BYTES = 1024 * 1024

NO_ANCHORS = "no anchors resolved from 'origins'"
PLAN_LANES = ("resolve", "query", "activate", "passages", "communities", "citations")
"""``plan.lanes`` in taguru's order (its ``EvidenceLanesPlan`` fields)."""


@dataclass(frozen=True)
class EvidenceRequest:
    """A decoded ``AssembleEvidenceRequest`` with every default applied."""

    origins: list[str]
    labels: list[str]
    dice_floor: float | None
    semantic_floor: float | None
    resolve_limit: int
    activate_decay: float
    activate_limit: int
    query: str
    search_limit: int
    include_communities: bool
    limits: BudgetLimits
    rerank_requested: bool
    rerank_model: str | None


def _clamped(value: int | None, default: int, ceiling: int) -> int:
    return min(default if value is None else value, ceiling)


def decode_request(body: object) -> EvidenceRequest:
    """The request, or its 422 (wrong JSON types) / 400 (``over_limit``) refusal."""
    fields = Fields(body, what="struct AssembleEvidenceRequest")
    if fields.required("origins") is None:  # required and not an Option: null is a type error
        raise type_error("origins", None, "a string or a sequence of strings")
    origins = fields.str_or_list("origins")
    labels = fields.str_or_list("labels")
    dice_floor = fields.opt_float("dice_floor")
    semantic_floor = fields.opt_float("semantic_floor", "f32")
    resolve_limit = fields.opt_uint("resolve_limit", "usize")
    decay = fields.opt_float("activate_decay")
    activate_limit = fields.opt_uint("activate_limit", "usize")
    fallback = fields.opt_str("text_fallback_query")
    search_limit = fields.opt_uint("search_limit", "usize")
    include_communities = bool(fields.opt_bool("include_communities"))
    raw_budget = fields.data.get("budget")
    budget = Fields({} if raw_budget is None else raw_budget, "budget", "struct BudgetRequest")
    limits = BudgetLimits(
        _clamped(budget.opt_uint("max_items", "usize"), DEFAULT_MAX_ITEMS, CEILING_MAX_ITEMS),
        _clamped(budget.opt_uint("max_bytes", "usize"), DEFAULT_MAX_BYTES, CEILING_MAX_BYTES),
        _clamped(budget.opt_uint("max_tokens", "usize"), DEFAULT_MAX_TOKENS, 2**64 - 1),
    )
    rerank_requested = fields.present("rerank")
    rerank_model = None
    if rerank_requested:
        rerank_model = Fields(fields.data["rerank"], "rerank", "struct RerankRequest").opt_str(
            "model"
        )
    for what, values in (("origins", origins), ("labels", labels)):
        if len(values) > MAX_LIST_ITEMS:
            raise over_limit(what, len(values), MAX_LIST_ITEMS)
    return EvidenceRequest(
        origins=origins,
        labels=labels,
        dice_floor=dice_floor,
        semantic_floor=semantic_floor,
        resolve_limit=_clamped(resolve_limit, MAX_MATCH_LIMIT, MAX_MATCH_LIMIT),
        activate_decay=DEFAULT_DECAY if decay is None else decay,
        activate_limit=_clamped(activate_limit, DEFAULT_ACTIVATE_LIMIT, MAX_MATCH_LIMIT),
        query="; ".join(origins) if fallback is None else fallback,
        search_limit=_clamped(search_limit, DEFAULT_SEARCH_LIMIT, MAX_EVIDENCE_SEARCH_LIMIT),
        include_communities=include_communities,
        limits=limits,
        rerank_requested=rerank_requested,
        rerank_model=rerank_model,
    )


def _ran() -> dict[str, object]:
    return {"ran": True}


def _skipped(reason: str) -> dict[str, object]:
    return {"ran": False, "reason": reason}


@dataclass
class GraphLanes:
    """The resolve, query and activate lanes' plans, their association candidates,
    and one ``empty`` flag per read they made of the context (in lane order)."""

    plans: dict[str, dict[str, object]]
    pool: list[EvidenceCandidate]
    reads: list[bool]


def graph_lanes(context: ContextState, request: EvidenceRequest) -> GraphLanes:
    anchors: list[str] = []
    reads: list[bool] = []
    for cue in request.origins:
        served = resolve_candidates(
            context, "concepts", cue, request.resolve_limit, request.dice_floor
        )
        reads.append(not served)
        if served and served[0].name not in anchors:
            anchors.append(served[0].name)
    plans = {"resolve": _ran() if request.origins else _skipped("origins was empty")}
    lanes = GraphLanes(plans, [], reads)
    if not anchors:
        plans["query"] = _skipped(NO_ANCHORS)
        plans["activate"] = _skipped(NO_ANCHORS)
        return lanes
    if request.labels:
        matches = matching_edges(context, anchors, request.labels, [])
        reads.append(not matches)
        for rank, edge in enumerate(matches[:QUERY_LANE_PAGE], start=1):
            association = association_out(context, edge)
            lanes.pool.append(association_candidate(association, "graph_query", rank))
        plans["query"] = _ran()
    else:
        plans["query"] = _skipped("no 'labels' given")
    reached, activations = activate_page(
        context, anchors, request.activate_decay, request.activate_limit
    )
    reads.append(reached == 0)
    for rank, activation in enumerate(activations, start=1):
        association = association_out(context, activation.edge)
        lanes.pool.append(association_candidate(association, "graph_activate", rank))
    plans["activate"] = _ran()
    return lanes


def communities_plan(call: Call, request: EvidenceRequest) -> dict[str, object]:
    """Always a degrade: this server builds no community artifacts."""
    if not request.include_communities:
        return _skipped("include_communities was false")
    derived = f"{call.name}::communities"
    if call.key is not None and not call.key.grants(derived):
        raise ApiError(
            "forbidden",
            f"this key's scope does not extend to the artifact context '{derived}' — grant it "
            f"alongside '{call.name}'",
        )
    return _skipped(
        f"no communities artifact for '{call.name}': context '{derived}' does not exist — run "
        "`taguru communities` to build it"
    )


def assemble(call: Call) -> object:
    """The ``EvidencePackage`` for one request (HTTP.md §6.9)."""
    request = decode_request(call.body)
    state = call.state
    with state.lock:
        context = state.context(call.name)
        graph = graph_lanes(context, request)
        plans, pool = graph.plans, graph.pool
        found = search_passages(
            context,
            request.query,
            request.search_limit,
            None,
            request.semantic_floor,
            state.jitter,
        )
        plans["passages"] = _ran() if found.skipped is None else _skipped(found.skipped)
        for empty in [*graph.reads, not found.hits]:
            state.count_read(context, empty=empty)
        pool += [passage_candidate(context.name, hit, r) for r, hit in enumerate(found.hits, 1)]
        plans["communities"] = communities_plan(call, request)
        citations: dict[Locator, dict[str, object]] = {}
        for candidate in pool:
            for source, paragraph in candidate.locators:
                cited = citation(context, source, paragraph)
                if cited is not None:
                    citations[(source, paragraph)] = cited
        plans["citations"] = _ran()
        fused, dropped = fuse(pool)
        outcome: RerankOutcome | None = None

        def reorder(survivors: list[FusedCandidate]) -> list[int] | None:
            nonlocal outcome
            texts = [group.candidate.text for group in survivors]
            outcome = rerank(state.reranker, request.rerank_model, request.query, texts)
            return outcome.order

        package = select(
            fused, dropped, request.limits, citations, reorder if request.rerank_requested else None
        )
    selection = package.pop("selection")
    reranker = not_requested(state.reranker) if outcome is None else outcome.plan
    lanes = {lane: plans[lane] for lane in PLAN_LANES}
    package["plan"] = {"lanes": lanes, "selection": selection, "reranker": reranker}
    return package


EVIDENCE_ROUTES: list[RouteSpec] = [
    RouteSpec("POST", "/contexts/{name}/evidence", "read", assemble, body="json"),
]

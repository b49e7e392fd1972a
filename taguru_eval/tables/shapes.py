"""The lane-output shapes: what the lanes produce for one case, as typed dicts.

They are exactly evaluation.json's nested shapes (EVALUATE.md §3.4–§3.6,
§6.7), so a run read back from an artifact (ours or taguru's) and the
conformance vectors go through the same table builder as a live run.

Each shape is declared once, here: its field order is the artifact's key
order, and the tables' nested dtypes derive from its field types
(:mod:`.derive`), ``Annotated`` naming a dtype where the Python type alone
does not (:data:`Int32`, :data:`Binary32`). ``tests/artifact/test_blocks.py``
holds the artifact's canonicalisers to the same order."""

from __future__ import annotations

from typing import Annotated, Final, NotRequired, TypeAlias, TypedDict

import polars as pl

Int32: TypeAlias = Annotated[int, pl.Int32()]
"""An integer the tables hold in 32 bits (ranks, case and call indexes, HTTP statuses)."""

Binary32: TypeAlias = Annotated[float, pl.Float32()]
"""A binary32 value (hit and lane scores, plan floors; printed from binary32, §6.9)."""

BUDGET_REASONS: Final = ("budget_exceeded", "contradiction_group_exceeds_budget")
"""The ``omitted_by_reason`` keys a budget caused: the only ones the tables read."""

_OMITTED_BY_REASON: Final = pl.Struct(dict.fromkeys(BUDGET_REASONS, pl.Int64()))


class LaneScore(TypedDict):
    rank: Int32
    score: Binary32


class HitLanes(TypedDict, total=False):
    bm25: LaneScore
    vector: LaneScore


class HitLocator(TypedDict):
    source: str
    paragraph: int
    score: Binary32
    lanes: HitLanes


class LanePlan(TypedDict):
    ran: bool
    reason: NotRequired[str]
    floor: NotRequired[Binary32]


class PlanLanes(TypedDict):
    bm25: LanePlan
    vector: LanePlan


class PlanFilter(TypedDict):
    eligible_sources: int
    total_sources: int


class Plan(TypedDict):
    context: str
    lanes: PlanLanes
    filter: NotRequired[PlanFilter]


class PassageOutcome(TypedDict):
    """``{outcome: "searched", plan?, hits, latency_ms}`` or failed with a message."""

    outcome: str
    plan: NotRequired[Plan]
    hits: NotRequired[list[HitLocator]]
    message: NotRequired[str]
    latency_ms: int


class CueResolution(TypedDict):
    cue: str
    kind: str  # "concept" | "label"
    resolved_names: list[str]
    tier: NotRequired[str]
    limit: int
    latency_ms: int
    error: NotRequired[str]


class PositionOutcome(TypedDict):
    """not_found | resolved (name, tier) | ambiguous (tier, candidates) | errored (message)."""

    outcome: str
    name: NotRequired[str]
    tier: NotRequired[str]
    candidates: NotRequired[list[str]]
    message: NotRequired[str]
    latency_ms: int


class Attribution(TypedDict):
    source: str
    paragraph: int | None


class AssociationQuery(TypedDict):
    """``{outcome: "queried", total, matches, attributions?, latency_ms}`` or errored."""

    outcome: str
    total: NotRequired[int]
    matches: NotRequired[int]
    attributions: NotRequired[list[Attribution]]
    message: NotRequired[str]
    latency_ms: int


class AssociationProbe(TypedDict):
    subject_cue: str
    label_cue: str
    object_cue: str
    subject: PositionOutcome
    label: PositionOutcome
    object: PositionOutcome
    query: NotRequired[AssociationQuery]


class Structural(TypedDict):
    cues: list[CueResolution]
    associations: list[AssociationProbe]


class SectionCheck(TypedDict):
    check: str  # "not_checked" | "matched" | "mismatched"
    expected: NotRequired[str | None]


class QuoteCheck(TypedDict):
    declared: str
    matched: bool


class CitationCheck(TypedDict):
    """Resolved: section (+ quote?); unresolved: code + message. Never any text."""

    source: str
    paragraph: int
    served: bool
    outcome: str  # "resolved" | "unresolved"
    section: NotRequired[SectionCheck]
    quote: NotRequired[QuoteCheck]
    code: NotRequired[str | None]
    message: NotRequired[str]
    latency_ms: int


class BudgetLimits(TypedDict):
    max_items: int
    max_bytes: int
    max_tokens: int


class BudgetUsage(TypedDict):
    items_used: int
    bytes_used: int
    tokens_used: int
    limits: BudgetLimits
    omitted_total: int


class AnswerCheck(TypedDict):
    """One declared answer judged on a case's served window (``--answers``): the
    answer's index in the case's list, whether a hit's text matched it under
    ``match`` and the 1-based rank of the first hit that did. Never any text."""

    answer_index: Int32
    found: bool
    rank: Int32 | None
    match: str


class CitationRef(TypedDict):
    """A ``(source, paragraph)`` an evidence item cites (no text)."""

    source: str
    paragraph: int


class LaneRank(TypedDict):
    """One retrieval lane's rank of an evidence item (``graph_activate``, ``passage_bm25``…)."""

    lane: str
    rank: int


class EvidenceItem(TypedDict):
    """An admitted item as the artifact lists it (§7.4): no payload, no lane ranks, no text.

    ``source``/``paragraph`` are the item's own locator (a passage's, or a
    community's as ``community:{id}``), absent for an association."""

    candidate_id: str
    kind: str
    fused_rank: int
    source: NotRequired[str]
    paragraph: NotRequired[int]
    citation_refs: list[CitationRef]


class EvidenceSelection(TypedDict):
    dedup_dropped: int
    contradiction_groups: int
    diversity_tier_width: int


class RerankerPlan(TypedDict):
    """``plan.reranker``: ``{configured, ran, model?, reason?}``."""

    configured: bool
    ran: bool
    model: NotRequired[str]
    reason: NotRequired[str]


class EvidenceOutcome(TypedDict):
    """The per-case ``evidence`` block (§7.4): assembled, or failed with a message."""

    outcome: str  # "assembled" | "failed"
    message: NotRequired[str]
    latency_ms: int
    items: NotRequired[list[EvidenceItem]]
    # An open set of reasons: the tables keep the budget's.
    omitted_by_reason: NotRequired[Annotated[dict[str, int], _OMITTED_BY_REASON]]
    selection: NotRequired[EvidenceSelection]
    reranker: NotRequired[RerankerPlan]


class EvidenceRow(TypedDict):
    """One evidence candidate of an assembled case, as the ``evidence_items`` table holds it.

    Admitted items in admission order, then the candidates the package lists
    as omitted (``omitted_reason``; at most the 20 the server lists). A live
    run knows each admitted item's lane ranks; a run read back from an
    artifact does not (``lane_ranks`` None) and has no omitted rows.
    """

    candidate_id: str
    kind: str
    admitted: bool
    fused_rank: int | None
    source: str | None
    paragraph: int | None
    lane_ranks: list[LaneRank] | None
    citation_refs: list[CitationRef] | None
    omitted_reason: str | None
    duplicate_of: str | None


class CallRecord(TypedDict):
    """One HTTP call of a case (one row of ``calls``)."""

    case_index: Int32
    case_id: str
    seq: Int32  # 0-based order of the call within its case
    lane: str  # passage | evidence | coverage | association | citation
    endpoint: str  # route template, e.g. "POST /contexts/{name}/resolve"
    item_index: Int32 | None  # cue / association / citation index
    position: str | None  # subject | label | object | query | None
    outcome: str
    http_status: Int32 | None
    latency_ms: int
    error: str | None  # already truncated to 200 bytes


class LaneOutput(TypedDict):
    """Everything the lanes produced for one case (G's lanes -> F's builders).

    ``query``/``cues``/``limit`` are the case's declared query, declared cues
    (not the query fallback) and effective limit, so the case block can be
    written from the lane output alone. ``tags`` is the case's
    ``options.tags``: the run store keeps it for per-tag slices, the artifact
    does not record it (absent in outputs read back from an artifact).
    ``structural`` is absent when the lane did not run; ``evidence`` (the §7.4
    block) and ``evidence_rows`` (its candidates as table rows) only exist in
    assembly runs, ``budget`` in assembly and budget-given runs.
    ``answer_checks`` exists for a case the answers file lists (``--answers``)
    whose first lane completed: the served text is judged there and then, and
    only these verdicts outlive the lane.
    """

    case_index: Int32
    case_id: str
    query: str
    cues: list[str]
    limit: int
    tags: NotRequired[list[str]]
    passage: PassageOutcome
    structural: NotRequired[Structural]
    checks: list[CitationCheck]
    calls: list[CallRecord]
    evidence: NotRequired[EvidenceOutcome]
    evidence_rows: NotRequired[list[EvidenceRow]]
    budget: NotRequired[BudgetUsage]
    answer_checks: NotRequired[list[AnswerCheck]]


class CitationsChecks(TypedDict):
    """The lanes' part of a case block's ``citations`` (the scorer writes ``recall``
    and ``validity`` beside it)."""

    checks: list[CitationCheck]


class CaseBlock(TypedDict):
    """The members of an evaluation.json case block the lanes recorded (§6.6), in its
    key order: what the artifact writes from a :class:`LaneOutput` and reads back
    into one. The scorer's members (``recall``, ``coverage``, …) come from the
    catalog."""

    case_id: str
    query: str
    cues: NotRequired[list[str]]
    limit: int
    passage: PassageOutcome
    structural: NotRequired[Structural]
    citations: NotRequired[CitationsChecks]
    evidence: NotRequired[EvidenceOutcome]
    budget: NotRequired[BudgetUsage]


class ResolveCandidate(TypedDict):
    """One name a must-refuse cue resolved to; ``kind`` is the resolver's match kind."""

    name: str
    tier: str
    kind: NotRequired[str]


class CueProbe(TypedDict):
    """One ``POST …/resolve {cue, limit: 5}`` of a must-refuse case (every candidate kept)."""

    cue: str
    candidates: list[ResolveCandidate]
    latency_ms: int
    error: NotRequired[str]


class RefusalOutput(TypedDict):
    """Everything the probes produced for one must-refuse case (ABSTENTION.md §3.4).

    ``case_index`` is the case's position in the must-refuse file. ``passage``
    has the eval lane's shape (under ``--assembly`` the evidence probe's
    scoring view, with ``evidence``, ``evidence_rows`` and ``budget`` as the
    eval evidence lane records them); ``cue_probes`` is empty when the case
    declares no cue (the structural probe did not run).
    """

    case_index: Int32
    case_id: str
    query: str
    cues: list[str]
    kind: str
    why: NotRequired[str]
    limit: int
    floor: NotRequired[Binary32]
    passage: PassageOutcome
    cue_probes: list[CueProbe]
    calls: list[CallRecord]
    evidence: NotRequired[EvidenceOutcome]
    evidence_rows: NotRequired[list[EvidenceRow]]
    budget: NotRequired[BudgetUsage]

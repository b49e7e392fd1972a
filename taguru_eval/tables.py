"""The run's tables: lane-output shapes, Arrow schemas, and LaneOutput -> frames.

Every HTTP call of a run is one row of ``calls``; what the calls returned lands
in ``case_lanes`` (one row per case), ``hits``, ``resolutions``, ``probes``,
``attributions`` and ``citation_checks``. The scorer adds ``cases`` (one row per
case, every per-case metric a column) and ``metrics`` (one row per aggregate).
Each schema is written once, as a pyarrow schema; the Polars schema is derived
from it so Parquet files and frames can never drift apart.

The lane-output shapes below are exactly evaluation.json's (EVALUATE.md
§3.4–§3.6, §6.7), so a run read back from an artifact (ours or taguru's) and
the conformance vectors go through the same builder as a live run.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, NotRequired, TypedDict

import polars as pl
import pyarrow as pa

# ---------------------------------------------------------------------------
# Lane-output shapes (evaluation.json's nested shapes, EVALUATE.md §6.7)
# ---------------------------------------------------------------------------


class LaneScore(TypedDict):
    rank: int
    score: float


class HitLanes(TypedDict, total=False):
    bm25: LaneScore
    vector: LaneScore


class HitLocator(TypedDict):
    source: str
    paragraph: int
    score: float
    lanes: HitLanes


class LanePlan(TypedDict):
    ran: bool
    reason: NotRequired[str]
    floor: NotRequired[float]


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


class CallRecord(TypedDict):
    """One HTTP call of a case (one row of ``calls``)."""

    case_index: int
    case_id: str
    seq: int  # 0-based order of the call within its case
    lane: str  # passage | evidence | coverage | association | citation
    endpoint: str  # route template, e.g. "POST /contexts/{name}/resolve"
    item_index: int | None  # cue / association / citation index
    position: str | None  # subject | label | object | query | None
    outcome: str
    http_status: int | None
    latency_ms: int
    error: str | None  # already truncated to 200 bytes


class LaneOutput(TypedDict):
    """Everything the lanes produced for one case (G's lanes -> F's builders).

    ``query``/``cues``/``limit`` are the case's declared query, declared cues
    (not the query fallback) and effective limit, so the case block can be
    written from the lane output alone. ``structural`` is absent when the lane
    did not run; ``evidence`` (opaque §7.4 block) and ``budget`` only exist in
    assembly / budget-given runs.
    """

    case_index: int
    case_id: str
    query: str
    cues: list[str]
    limit: int
    passage: PassageOutcome
    structural: NotRequired[Structural]
    checks: list[CitationCheck]
    calls: list[CallRecord]
    evidence: NotRequired[dict[str, Any]]
    budget: NotRequired[BudgetUsage]


# ---------------------------------------------------------------------------
# Flat table schemas (defined once, as Arrow; Polars derived)
# ---------------------------------------------------------------------------

_RUN = [pa.field("run_id", pa.string()), pa.field("case_index", pa.int32())]
_CASE = [*_RUN, pa.field("case_id", pa.string())]

CALLS_SCHEMA = pa.schema(
    [
        *_CASE,
        pa.field("seq", pa.int32()),
        pa.field("lane", pa.string()),
        pa.field("endpoint", pa.string()),
        pa.field("item_index", pa.int32()),
        pa.field("position", pa.string()),
        pa.field("outcome", pa.string()),
        pa.field("http_status", pa.int32()),
        pa.field("latency_ms", pa.int64()),
        pa.field("error", pa.string()),
    ]
)

CASE_LANES_SCHEMA = pa.schema(
    [
        *_CASE,
        pa.field("query", pa.string()),
        pa.field("cues", pa.list_(pa.string())),
        pa.field("limit", pa.int64()),
        pa.field("passage_outcome", pa.string()),
        pa.field("passage_message", pa.string()),
        pa.field("passage_latency_ms", pa.int64()),
        pa.field("hit_count", pa.int64()),
        pa.field("plan_context", pa.string()),
        pa.field("plan_bm25_ran", pa.bool_()),
        pa.field("plan_bm25_reason", pa.string()),
        pa.field("plan_bm25_floor", pa.float32()),
        pa.field("plan_vector_ran", pa.bool_()),
        pa.field("plan_vector_reason", pa.string()),
        pa.field("plan_vector_floor", pa.float32()),
        pa.field("plan_filter_eligible_sources", pa.int64()),
        pa.field("plan_filter_total_sources", pa.int64()),
        pa.field("structural_ran", pa.bool_()),
        pa.field("citation_count", pa.int64()),
        # Assembly / budget room (EVALUATE.md §7); null in a plain baseline run.
        pa.field("evidence_outcome", pa.string()),
        pa.field("evidence_message", pa.string()),
        pa.field("evidence_latency_ms", pa.int64()),
        pa.field("reranker_ran", pa.bool_()),
        pa.field("reranker_reason", pa.string()),
        pa.field("budget_items_used", pa.int64()),
        pa.field("budget_bytes_used", pa.int64()),
        pa.field("budget_tokens_used", pa.int64()),
        pa.field("budget_max_items", pa.int64()),
        pa.field("budget_max_bytes", pa.int64()),
        pa.field("budget_max_tokens", pa.int64()),
        pa.field("budget_omitted_total", pa.int64()),
        # Omissions a budget ceiling caused (EVALUATE.md §5.2 budget.omitted_rate).
        pa.field("budget_omitted_by_budget", pa.int64()),
    ]
)

HITS_SCHEMA = pa.schema(
    [
        *_CASE,
        pa.field("rank", pa.int32()),  # 0-based position in passage.hits
        pa.field("source", pa.string()),
        pa.field("paragraph", pa.int64()),
        pa.field("score", pa.float32()),
        pa.field("bm25_rank", pa.int32()),
        pa.field("bm25_score", pa.float32()),
        pa.field("vector_rank", pa.int32()),
        pa.field("vector_score", pa.float32()),
    ]
)

RESOLUTIONS_SCHEMA = pa.schema(
    [
        *_CASE,
        pa.field("cue_index", pa.int32()),  # position in structural.cues
        pa.field("cue", pa.string()),
        pa.field("kind", pa.string()),
        pa.field("tier", pa.string()),
        pa.field("error", pa.string()),
        pa.field("latency_ms", pa.int64()),
        # One row per resolved name; a cue that resolved nothing keeps one row
        # with rank/name null so its latency and error stay visible.
        pa.field("rank", pa.int32()),
        pa.field("name", pa.string()),
    ]
)

_POSITION_FIELDS = [
    field
    for position in ("subject", "label", "object")
    for field in (
        pa.field(f"{position}_outcome", pa.string()),
        pa.field(f"{position}_name", pa.string()),
        pa.field(f"{position}_tier", pa.string()),
        pa.field(f"{position}_candidates", pa.list_(pa.string())),
        pa.field(f"{position}_message", pa.string()),
        pa.field(f"{position}_latency_ms", pa.int64()),
    )
]

PROBES_SCHEMA = pa.schema(
    [
        *_CASE,
        pa.field("association_index", pa.int32()),
        pa.field("subject_cue", pa.string()),
        pa.field("label_cue", pa.string()),
        pa.field("object_cue", pa.string()),
        *_POSITION_FIELDS,
        pa.field("query_outcome", pa.string()),  # null: the query was never called
        pa.field("query_total", pa.int64()),
        pa.field("query_matches", pa.int64()),
        pa.field("query_message", pa.string()),
        pa.field("query_latency_ms", pa.int64()),
    ]
)

ATTRIBUTIONS_SCHEMA = pa.schema(
    [
        *_CASE,
        pa.field("association_index", pa.int32()),
        pa.field("attribution_index", pa.int32()),
        pa.field("source", pa.string()),
        pa.field("paragraph", pa.int64()),  # null: attribution without a paragraph
    ]
)

CITATION_CHECKS_SCHEMA = pa.schema(
    [
        *_CASE,
        pa.field("citation_index", pa.int32()),
        pa.field("source", pa.string()),
        pa.field("paragraph", pa.int64()),
        pa.field("served", pa.bool_()),
        pa.field("outcome", pa.string()),
        pa.field("section_check", pa.string()),  # null when unresolved
        pa.field("section_expected", pa.string()),  # declared value (null = declared null)
        pa.field("quote_declared", pa.string()),
        pa.field("quote_matched", pa.bool_()),
        pa.field("code", pa.string()),
        pa.field("message", pa.string()),
        pa.field("latency_ms", pa.int64()),
    ]
)

_BLOCK_FIELDS = [
    field
    for block in ("concepts", "labels", "associations")
    for field in (
        pa.field(f"coverage_{block}_expected", pa.int64()),
        pa.field(f"coverage_{block}_matched", pa.int64()),
        pa.field(f"coverage_{block}", pa.float64()),
    )
]

CASES_SCHEMA = pa.schema(
    [
        *_CASE,
        pa.field("passage_outcome", pa.string()),
        pa.field("passage_latency_ms", pa.int64()),
        pa.field("structural_ran", pa.bool_()),
        pa.field("recall_expected_total", pa.int64()),
        pa.field("recall_matched", pa.int64()),
        pa.field("recall_at_k", pa.float64()),
        pa.field("mrr", pa.float64()),
        pa.field("ndcg", pa.float64()),
        *_BLOCK_FIELDS,
        pa.field("lane_cross_structural_hit", pa.bool_()),
        pa.field("lane_cross_passage_hit", pa.bool_()),
        pa.field("citations_expected_total", pa.int64()),
        pa.field("citations_matched", pa.int64()),
        pa.field("citations_recall", pa.float64()),
        pa.field("citations_valid", pa.int64()),
        pa.field("citations_locator_validity", pa.float64()),
        pa.field("missed", pa.list_(pa.string())),
        pa.field("missed_truncated", pa.int64()),
        pa.field("diversity_sources", pa.int64()),
        pa.field("evidence_latency_ms", pa.int64()),
        pa.field("budget_items_used", pa.int64()),
        pa.field("budget_bytes_used", pa.int64()),
        pa.field("budget_tokens_used", pa.int64()),
        pa.field("budget_omitted_total", pa.int64()),
    ]
)

METRICS_SCHEMA = pa.schema(
    [
        pa.field("run_id", pa.string()),
        pa.field("metric", pa.string()),
        pa.field("statistic", pa.string()),  # distribution | ratio | count
        pa.field("n", pa.int64()),
        pa.field("value", pa.float64()),  # ratio / count
        pa.field("numerator", pa.int64()),  # ratio
        pa.field("min", pa.float64()),
        pa.field("p50", pa.float64()),
        pa.field("p90", pa.float64()),
        pa.field("p99", pa.float64()),
        pa.field("max", pa.float64()),
        pa.field("mean", pa.float64()),
        pa.field("sum", pa.float64()),
    ]
)


CASE_METRIC_COLUMNS: Final[Mapping[str, str]] = {
    "recall.recall_at_k": "recall_at_k",
    "recall.mrr": "mrr",
    "recall.ndcg": "ndcg",
    "coverage.concepts": "coverage_concepts",
    "coverage.labels": "coverage_labels",
    "coverage.associations": "coverage_associations",
    "citations.recall": "citations_recall",
    "citations.locator_validity": "citations_locator_validity",
    "latency.passage_ms": "passage_latency_ms",
    "diversity.sources": "diversity_sources",
}
"""Case-scoped metric (GATE_AND_COMPARE.md §3) -> its column in the ``cases`` table."""


def polars_schema(schema: pa.Schema) -> pl.Schema:
    """The Polars schema of an Arrow schema (the one derivation used everywhere)."""
    # Not ``schema.empty_table()``: that drags pandas in through pyarrow's
    # pandas metadata hook, and the package promises a pandas-free import.
    frame = pl.from_arrow(pa.Table.from_batches([], schema=schema))
    assert isinstance(frame, pl.DataFrame)
    return frame.schema


CALLS = polars_schema(CALLS_SCHEMA)
CASE_LANES = polars_schema(CASE_LANES_SCHEMA)
HITS = polars_schema(HITS_SCHEMA)
RESOLUTIONS = polars_schema(RESOLUTIONS_SCHEMA)
PROBES = polars_schema(PROBES_SCHEMA)
ATTRIBUTIONS = polars_schema(ATTRIBUTIONS_SCHEMA)
CITATION_CHECKS = polars_schema(CITATION_CHECKS_SCHEMA)
CASES = polars_schema(CASES_SCHEMA)
METRICS = polars_schema(METRICS_SCHEMA)

# Parquet file stem -> Arrow schema, for the run store.
ARROW_SCHEMAS: dict[str, pa.Schema] = {
    "calls": CALLS_SCHEMA,
    "case_lanes": CASE_LANES_SCHEMA,
    "hits": HITS_SCHEMA,
    "resolutions": RESOLUTIONS_SCHEMA,
    "probes": PROBES_SCHEMA,
    "attributions": ATTRIBUTIONS_SCHEMA,
    "citation_checks": CITATION_CHECKS_SCHEMA,
    "cases": CASES_SCHEMA,
    "metrics": METRICS_SCHEMA,
}


def conform(frame: pl.DataFrame, schema: pl.Schema) -> pl.DataFrame:
    """Select ``schema``'s columns in order, cast to its dtypes (missing ones null)."""
    present = set(frame.columns)
    return frame.select(
        [
            (pl.col(name) if name in present else pl.lit(None)).cast(dtype).alias(name)
            for name, dtype in schema.items()
        ]
    )


# ---------------------------------------------------------------------------
# Nested Polars dtypes used to read LaneOutputs in one columnar pass
# ---------------------------------------------------------------------------

_LANE_SCORE = pl.Struct({"rank": pl.Int32, "score": pl.Float32})
_HIT = pl.Struct(
    {
        "source": pl.String,
        "paragraph": pl.Int64,
        "score": pl.Float32,
        "lanes": pl.Struct({"bm25": _LANE_SCORE, "vector": _LANE_SCORE}),
    }
)
_LANE_PLAN = pl.Struct({"ran": pl.Boolean, "reason": pl.String, "floor": pl.Float32})
_PLAN = pl.Struct(
    {
        "context": pl.String,
        "lanes": pl.Struct({"bm25": _LANE_PLAN, "vector": _LANE_PLAN}),
        "filter": pl.Struct({"eligible_sources": pl.Int64, "total_sources": pl.Int64}),
    }
)
_PASSAGE = pl.Struct(
    {
        "outcome": pl.String,
        "plan": _PLAN,
        "hits": pl.List(_HIT),
        "message": pl.String,
        "latency_ms": pl.Int64,
    }
)
_CUE = pl.Struct(
    {
        "cue": pl.String,
        "kind": pl.String,
        "resolved_names": pl.List(pl.String),
        "tier": pl.String,
        "limit": pl.Int64,
        "latency_ms": pl.Int64,
        "error": pl.String,
    }
)
_POSITION = pl.Struct(
    {
        "outcome": pl.String,
        "name": pl.String,
        "tier": pl.String,
        "candidates": pl.List(pl.String),
        "message": pl.String,
        "latency_ms": pl.Int64,
    }
)
_ATTRIBUTION = pl.Struct({"source": pl.String, "paragraph": pl.Int64})
_QUERY = pl.Struct(
    {
        "outcome": pl.String,
        "total": pl.Int64,
        "matches": pl.Int64,
        "attributions": pl.List(_ATTRIBUTION),
        "message": pl.String,
        "latency_ms": pl.Int64,
    }
)
_PROBE = pl.Struct(
    {
        "subject_cue": pl.String,
        "label_cue": pl.String,
        "object_cue": pl.String,
        "subject": _POSITION,
        "label": _POSITION,
        "object": _POSITION,
        "query": _QUERY,
    }
)
_CHECK = pl.Struct(
    {
        "source": pl.String,
        "paragraph": pl.Int64,
        "served": pl.Boolean,
        "outcome": pl.String,
        "section": pl.Struct({"check": pl.String, "expected": pl.String}),
        "quote": pl.Struct({"declared": pl.String, "matched": pl.Boolean}),
        "code": pl.String,
        "message": pl.String,
        "latency_ms": pl.Int64,
    }
)
_CALL = pl.Struct(
    {
        "seq": pl.Int32,
        "lane": pl.String,
        "endpoint": pl.String,
        "item_index": pl.Int32,
        "position": pl.String,
        "outcome": pl.String,
        "http_status": pl.Int32,
        "latency_ms": pl.Int64,
        "error": pl.String,
    }
)
_BUDGET = pl.Struct(
    {
        "items_used": pl.Int64,
        "bytes_used": pl.Int64,
        "tokens_used": pl.Int64,
        "limits": pl.Struct({"max_items": pl.Int64, "max_bytes": pl.Int64, "max_tokens": pl.Int64}),
        "omitted_total": pl.Int64,
    }
)
_EVIDENCE = pl.Struct(
    {
        "outcome": pl.String,
        "message": pl.String,
        "latency_ms": pl.Int64,
        "omitted_by_reason": pl.Struct(
            {"budget_exceeded": pl.Int64, "contradiction_group_exceeds_budget": pl.Int64}
        ),
        "reranker": pl.Struct({"ran": pl.Boolean, "reason": pl.String}),
    }
)

_LANE_OUTPUT = pl.Schema(
    [
        ("case_index", pl.Int32()),
        ("case_id", pl.String()),
        ("query", pl.String()),
        ("cues", pl.List(pl.String)),
        ("limit", pl.Int64()),
        ("passage", _PASSAGE),
        ("structural", pl.Struct({"cues": pl.List(_CUE), "associations": pl.List(_PROBE)})),
        ("checks", pl.List(_CHECK)),
        ("calls", pl.List(_CALL)),
        ("evidence", _EVIDENCE),
        ("budget", _BUDGET),
    ]
)


@dataclass(frozen=True)
class RunTables:
    """The lane-level frames of one run (the scorer adds ``cases`` and ``metrics``)."""

    run_id: str
    case_lanes: pl.DataFrame
    calls: pl.DataFrame
    hits: pl.DataFrame
    resolutions: pl.DataFrame
    probes: pl.DataFrame
    attributions: pl.DataFrame
    citation_checks: pl.DataFrame

    def frames(self) -> dict[str, pl.DataFrame]:
        """Table name -> frame, in the run store's file order."""
        return {
            "calls": self.calls,
            "case_lanes": self.case_lanes,
            "hits": self.hits,
            "resolutions": self.resolutions,
            "probes": self.probes,
            "attributions": self.attributions,
            "citation_checks": self.citation_checks,
        }


def _lane_output_frame(lane_outputs: Sequence[Mapping[str, Any]]) -> pl.DataFrame:
    """All lane outputs as one nested frame (missing optional keys become null)."""
    rows = [{name: output.get(name) for name in _LANE_OUTPUT.names()} for output in lane_outputs]
    return pl.DataFrame(rows, schema=_LANE_OUTPUT)


def _explode_list(frame: pl.DataFrame, column: str, index_name: str) -> pl.DataFrame:
    """One row per element of list column ``column`` (a struct), with its 0-based index."""
    return (
        frame.filter(pl.col(column).list.len() > 0)
        .with_columns(pl.int_ranges(pl.col(column).list.len(), dtype=pl.Int32).alias(index_name))
        .explode([column, index_name])
    )


def build_tables(lane_outputs: Sequence[LaneOutput], run_id: str) -> RunTables:
    """Turn the lanes' per-case outputs into the run's flat frames (case order kept)."""
    nested = _lane_output_frame(lane_outputs).sort("case_index", maintain_order=True)
    keys = [
        pl.lit(run_id, dtype=pl.String).alias("run_id"),
        pl.col("case_index"),
        pl.col("case_id"),
    ]
    passage = pl.col("passage")
    plan = passage.struct.field("plan")
    plan_lanes = plan.struct.field("lanes")
    budget = pl.col("budget")
    budget_limits = budget.struct.field("limits")
    evidence = pl.col("evidence")
    omitted_by_reason = evidence.struct.field("omitted_by_reason")

    case_lanes = nested.select(
        *keys,
        pl.col("query"),
        pl.col("cues").fill_null([]),
        pl.col("limit"),
        passage.struct.field("outcome").alias("passage_outcome"),
        passage.struct.field("message").alias("passage_message"),
        passage.struct.field("latency_ms").alias("passage_latency_ms"),
        pl.when(passage.struct.field("outcome") == "searched")
        .then(passage.struct.field("hits").list.len().fill_null(0))
        .alias("hit_count"),
        plan.struct.field("context").alias("plan_context"),
        *[
            plan_lanes.struct.field(lane).struct.field(attr).alias(f"plan_{lane}_{attr}")
            for lane in ("bm25", "vector")
            for attr in ("ran", "reason", "floor")
        ],
        plan.struct.field("filter")
        .struct.field("eligible_sources")
        .alias("plan_filter_eligible_sources"),
        plan.struct.field("filter")
        .struct.field("total_sources")
        .alias("plan_filter_total_sources"),
        pl.col("structural").is_not_null().alias("structural_ran"),
        pl.col("checks").list.len().fill_null(0).alias("citation_count"),
        pl.col("evidence").struct.field("outcome").alias("evidence_outcome"),
        evidence.struct.field("message").alias("evidence_message"),
        pl.col("evidence").struct.field("latency_ms").alias("evidence_latency_ms"),
        evidence.struct.field("reranker").struct.field("ran").alias("reranker_ran"),
        evidence.struct.field("reranker").struct.field("reason").alias("reranker_reason"),
        budget.struct.field("items_used").alias("budget_items_used"),
        budget.struct.field("bytes_used").alias("budget_bytes_used"),
        budget.struct.field("tokens_used").alias("budget_tokens_used"),
        budget_limits.struct.field("max_items").alias("budget_max_items"),
        budget_limits.struct.field("max_bytes").alias("budget_max_bytes"),
        budget_limits.struct.field("max_tokens").alias("budget_max_tokens"),
        budget.struct.field("omitted_total").alias("budget_omitted_total"),
        # Assembly: only the budget reasons count; baseline: every omission is the budget's.
        pl.when(evidence.is_not_null())
        .then(
            omitted_by_reason.struct.field("budget_exceeded").fill_null(0)
            + omitted_by_reason.struct.field("contradiction_group_exceeds_budget").fill_null(0)
        )
        .otherwise(budget.struct.field("omitted_total"))
        .alias("budget_omitted_by_budget"),
    )

    searched = nested.filter(passage.struct.field("outcome") == "searched").select(
        *keys, passage.struct.field("hits").fill_null([]).alias("hit")
    )
    hits = _flatten_hits(_explode_list(searched, "hit", "rank"))

    structural = nested.filter(pl.col("structural").is_not_null())
    cue_rows = _explode_list(
        structural.select(*keys, pl.col("structural").struct.field("cues").alias("cue_row")),
        "cue_row",
        "cue_index",
    ).with_columns(pl.col("cue_row").struct.unnest())
    resolutions = (
        cue_rows.with_columns(
            pl.int_ranges(pl.col("resolved_names").list.len(), dtype=pl.Int32).alias("rank")
        )
        .with_columns(
            # A cue without names keeps one row (rank/name null): explode of [None].
            pl.when(pl.col("resolved_names").list.len() > 0)
            .then(pl.col("resolved_names"))
            .otherwise(pl.lit([None], dtype=pl.List(pl.String)))
            .alias("name"),
            pl.when(pl.col("resolved_names").list.len() > 0)
            .then(pl.col("rank"))
            .otherwise(pl.lit([None], dtype=pl.List(pl.Int32)))
            .alias("rank"),
        )
        .explode(["name", "rank"])
    )

    probe_rows = _explode_list(
        structural.select(*keys, pl.col("structural").struct.field("associations").alias("probe")),
        "probe",
        "association_index",
    ).with_columns(pl.col("probe").struct.unnest())
    probes = probe_rows.with_columns(
        *[
            pl.col(position).struct.field(attr).alias(f"{position}_{attr}")
            for position in ("subject", "label", "object")
            for attr in ("outcome", "name", "tier", "candidates", "message", "latency_ms")
        ],
        *[
            pl.col("query").struct.field(attr).alias(f"query_{attr}")
            for attr in ("outcome", "total", "matches", "message", "latency_ms")
        ],
    )
    attributions = _explode_list(
        probe_rows.select(
            *[pl.col(k) for k in ("run_id", "case_index", "case_id", "association_index")],
            pl.col("query").struct.field("attributions").fill_null([]).alias("attribution"),
        ),
        "attribution",
        "attribution_index",
    ).with_columns(pl.col("attribution").struct.unnest())

    check_rows = _explode_list(
        nested.select(*keys, pl.col("checks").fill_null([]).alias("check_row")),
        "check_row",
        "citation_index",
    ).with_columns(pl.col("check_row").struct.unnest())
    citation_checks = check_rows.with_columns(
        pl.col("section").struct.field("check").alias("section_check"),
        pl.col("section").struct.field("expected").alias("section_expected"),
        pl.col("quote").struct.field("declared").alias("quote_declared"),
        pl.col("quote").struct.field("matched").alias("quote_matched"),
    )

    call_rows = _explode_list(
        nested.select(*keys, pl.col("calls").fill_null([]).alias("call")), "call", "call_pos"
    ).with_columns(pl.col("call").struct.unnest())

    return RunTables(
        run_id=run_id,
        case_lanes=conform(case_lanes, CASE_LANES),
        calls=conform(call_rows.sort(["case_index", "seq"], maintain_order=True), CALLS),
        hits=conform(hits, HITS),
        resolutions=conform(resolutions, RESOLUTIONS),
        probes=conform(probes, PROBES),
        attributions=conform(attributions, ATTRIBUTIONS),
        citation_checks=conform(citation_checks, CITATION_CHECKS),
    )


def _flatten_hits(frame: pl.DataFrame) -> pl.DataFrame:
    hit = pl.col("hit")
    lanes = hit.struct.field("lanes")
    return frame.with_columns(
        hit.struct.field("source").alias("source"),
        hit.struct.field("paragraph").alias("paragraph"),
        hit.struct.field("score").alias("score"),
        lanes.struct.field("bm25").struct.field("rank").alias("bm25_rank"),
        lanes.struct.field("bm25").struct.field("score").alias("bm25_score"),
        lanes.struct.field("vector").struct.field("rank").alias("vector_rank"),
        lanes.struct.field("vector").struct.field("score").alias("vector_score"),
    )


def empty_tables(run_id: str) -> RunTables:
    """The frames of a run with zero cases."""
    return build_tables([], run_id)

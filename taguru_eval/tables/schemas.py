"""The run's flat tables, each declared once as an Arrow schema.

Every HTTP call of a run is one row of ``calls``; what the calls returned lands
in ``case_lanes`` (one row per case), ``hits``, ``resolutions``, ``probes``,
``attributions`` and ``citation_checks``. The scorer adds ``cases`` (one row per
case, every per-case metric a column) and ``metrics`` (one row per aggregate).
The Polars schemas are derived from the Arrow ones, so Parquet files and
frames can never drift apart."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

import polars as pl
import pyarrow as pa

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

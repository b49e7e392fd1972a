"""The run's tables, each declared once: :data:`TABLES`, a list of name -> Arrow schema.

Every HTTP call of a run is one row of ``calls``; what the calls returned lands
in ``case_lanes`` (one row per case), ``hits``, ``resolutions``, ``probes``,
``attributions``, ``citation_checks`` and, with ``--assembly``,
``evidence_items``. The scorer adds ``cases`` (one row per case, every
per-case metric a column) and ``metrics`` (one row per aggregate).
With ``--must-refuse`` the probes' calls, hits and cue resolutions join the same
three tables under ``population`` ``must_refuse``, ``refusal_lanes`` holds what
each probe got and the scorer adds ``refusal_cases`` (the verdicts).
The Polars schemas, the Parquet file names, empty frames and the run-tables
type all derive from :data:`TABLES`, so Parquet files and frames can never
drift apart. A per-case metric's column (name and type) comes from the
catalog. The eval set's ``expected`` frame is declared here too, with the
key types the scorer joins on."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, Final

import polars as pl
import pyarrow as pa

from taguru_eval.catalog import (
    ANSWERS_BLOCK,
    ANSWERS_METRICS,
    CATALOG,
    STABILITY_BLOCK,
    STABILITY_DIFFERS,
    STABILITY_METRICS,
    STABILITY_UNSTABLE,
    Catalog,
)

_RUN = [pa.field("run_id", pa.string()), pa.field("case_index", pa.int32())]

_CASE = [*_RUN, pa.field("case_id", pa.string())]

POPULATION_EVAL: Final = "eval"
POPULATION_MUST_REFUSE: Final = "must_refuse"
POPULATIONS: Final = (POPULATION_EVAL, POPULATION_MUST_REFUSE)

# Which file a row's case comes from (ABSTENTION.md §3.6): eval.jsonl, or the
# must-refuse file. Always written (``eval`` in a run without --must-refuse),
# so every stored run of a context shares one schema; ``case_index`` is the
# position within that file, so (population, case_index) is the row's case.
_POPULATION = pa.field("population", pa.string())

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
        _POPULATION,
        # The 0-based repetition of the case the call belongs to (run --repeat N
        # sends every eval case N times; ``seq`` counts within one repetition).
        # Always written, 0 in a run without --repeat (and for every must-refuse
        # probe), so every stored run of a context shares one schema; null only
        # in a run stored before the column existed.
        pa.field("repeat", pa.int32()),
    ]
)

_PLAN_FIELDS = [
    pa.field("plan_context", pa.string()),
    pa.field("plan_bm25_ran", pa.bool_()),
    pa.field("plan_bm25_reason", pa.string()),
    pa.field("plan_bm25_floor", pa.float32()),
    pa.field("plan_vector_ran", pa.bool_()),
    pa.field("plan_vector_reason", pa.string()),
    pa.field("plan_vector_floor", pa.float32()),
    pa.field("plan_filter_eligible_sources", pa.int64()),
    pa.field("plan_filter_total_sources", pa.int64()),
]

CASE_LANES_SCHEMA = pa.schema(
    [
        *_CASE,
        pa.field("query", pa.string()),
        pa.field("cues", pa.list_(pa.string())),
        pa.field("limit", pa.int64()),
        # The case's options.tags (null: not recorded, e.g. a run imported from
        # an evaluation.json, which does not carry tags).
        pa.field("tags", pa.list_(pa.string())),
        pa.field("passage_outcome", pa.string()),
        pa.field("passage_message", pa.string()),
        pa.field("passage_latency_ms", pa.int64()),
        pa.field("hit_count", pa.int64()),
        *_PLAN_FIELDS,
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
        _POPULATION,
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
        _POPULATION,
        # The resolver's match kind of the name (exact, alias, containment, fuzzy,
        # …) where a must-refuse cue probe records it; null for eval rows.
        pa.field("match_kind", pa.string()),
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


EVIDENCE_ITEMS_SCHEMA = pa.schema(
    [
        *_CASE,
        pa.field("item_index", pa.int32()),  # admitted items first, then the listed omissions
        pa.field("candidate_id", pa.string()),  # kind, NUL, canonical key (HTTP.md §6.9)
        pa.field("kind", pa.string()),  # association | passage | community (open)
        pa.field("admitted", pa.bool_()),
        pa.field("fused_rank", pa.int64()),  # null for an omitted candidate
        pa.field("source", pa.string()),  # the item's own locator; null for an association
        pa.field("paragraph", pa.int64()),
        # null when not recorded (a run read back from evaluation.json) or omitted
        pa.field(
            "lane_ranks",
            pa.list_(pa.struct([pa.field("lane", pa.string()), pa.field("rank", pa.int64())])),
        ),
        pa.field(
            "citation_refs",
            pa.list_(
                pa.struct([pa.field("source", pa.string()), pa.field("paragraph", pa.int64())])
            ),
        ),
        pa.field("omitted_reason", pa.string()),  # null when admitted
        pa.field("duplicate_of", pa.string()),
        _POPULATION,
    ]
)


def _metric(name: str, catalog: Catalog) -> pa.Field:
    """The ``cases`` column of a per-case metric, as the catalog declares it."""
    case_field = catalog.per_case[name]
    return pa.field(case_field.column, case_field.dtype)


def cases_schema(catalog: Catalog = CATALOG) -> pa.Schema:
    """The ``cases`` table: one row per case, every per-case metric a column.

    The columns of the 31 metrics keep their documented order; a per-case
    metric a catalog adds is appended, typed as the catalog declares it.
    """

    def metric(name: str) -> pa.Field:
        return _metric(name, catalog)

    listed = [
        *_CASE,
        pa.field("passage_outcome", pa.string()),
        metric("latency.passage_ms"),
        pa.field("structural_ran", pa.bool_()),
        pa.field("recall_expected_total", pa.int64()),
        pa.field("recall_matched", pa.int64()),
        metric("recall.recall_at_k"),
        metric("recall.mrr"),
        metric("recall.ndcg"),
        *[
            field
            for block in ("concepts", "labels", "associations")
            for field in (
                pa.field(f"coverage_{block}_expected", pa.int64()),
                pa.field(f"coverage_{block}_matched", pa.int64()),
                metric(f"coverage.{block}"),
            )
        ],
        pa.field("lane_cross_structural_hit", pa.bool_()),
        pa.field("lane_cross_passage_hit", pa.bool_()),
        pa.field("citations_expected_total", pa.int64()),
        pa.field("citations_matched", pa.int64()),
        metric("citations.recall"),
        pa.field("citations_valid", pa.int64()),
        metric("citations.locator_validity"),
        pa.field("missed", pa.list_(pa.string())),
        pa.field("missed_truncated", pa.int64()),
        metric("diversity.sources"),
        metric("latency.evidence_ms"),
        metric("budget.items_used"),
        metric("budget.bytes_used"),
        metric("budget.tokens_used"),
        pa.field("budget_omitted_total", pa.int64()),
        # ABSTENTION.md §3.6/§3.7: the must-refuse rule applied to the case's own
        # hits; null in a run without --must-refuse and outside the answerable
        # population (a declared relevant source, a completed passage lane).
        pa.field("answerability_verdict", pa.string()),
        pa.field("answerability_reason", pa.string()),
        pa.field("offered", pa.bool_()),
        pa.field("supported", pa.bool_()),
    ]
    if set(ANSWERS_METRICS) <= set(catalog):
        # The answers block's counts (--answers); its three values follow as metrics.
        listed += [
            pa.field(ANSWERS_BLOCK, pa.int64()),
            pa.field("answers_found", pa.int64()),
            pa.field("answers_first_rank", pa.int64()),
        ]
    names = {field.name for field in listed}
    added = [
        metric(name) for name in catalog.per_case if catalog.per_case[name].column not in names
    ]
    if set(STABILITY_METRICS) <= set(catalog):
        # run --repeat N (N > 1), last: how many repetitions, whether the compared
        # metrics differed across them, and which did (in compare's order).
        added += [
            pa.field(STABILITY_BLOCK, pa.int64()),
            pa.field(STABILITY_UNSTABLE, pa.bool_()),
            pa.field(STABILITY_DIFFERS, pa.list_(pa.string())),
        ]
    return pa.schema([*listed, *added])


CASES_SCHEMA = cases_schema()

ANSWER_CHECKS_SCHEMA = pa.schema(
    [
        *_CASE,
        pa.field("answer_index", pa.int32()),  # the answer's position in the case's list
        pa.field("found", pa.bool_()),
        pa.field("rank", pa.int32()),  # 1-based rank of the first matching hit; null: not found
        pa.field("match", pa.string()),  # normalized | tokens
    ]
)


REFUSAL_LANES_SCHEMA = pa.schema(
    [
        *_CASE,
        pa.field("kind", pa.string()),  # out_of_corpus | adjacent | unspecified
        pa.field("why", pa.string()),  # the author's own note, never corpus text
        pa.field("query", pa.string()),
        pa.field("cues", pa.list_(pa.string())),
        pa.field("limit", pa.int64()),
        pa.field("floor", pa.float32()),  # options.floor as declared
        pa.field("passage_outcome", pa.string()),
        pa.field("passage_message", pa.string()),
        pa.field("passage_latency_ms", pa.int64()),
        pa.field("hit_count", pa.int64()),
        *_PLAN_FIELDS,
        pa.field("structural_ran", pa.bool_()),
        # The evidence probe (--assembly): assembled | failed, and the package's
        # uncapped omitted_total; null in baseline mode.
        pa.field("evidence_outcome", pa.string()),
        pa.field("omitted_total", pa.int64()),
    ]
)

REFUSAL_CASES_SCHEMA = pa.schema(
    [
        *_CASE,
        pa.field("kind", pa.string()),
        pa.field("verdict", pa.string()),  # abstained | surfaced | undetermined | failed
        pa.field("reason", pa.string()),  # null only when abstained
        pa.field(
            "surfaced_by", pa.string()
        ),  # passage | evidence | structural; null unless surfaced
        # The passage probe's verdict, or under --assembly the evidence probe's.
        pa.field("passage_verdict", pa.string()),
        pa.field("passage_reason", pa.string()),
        pa.field("hits_served", pa.int64()),
        pa.field("vector_hits", pa.int64()),
        pa.field("bm25_only_hits", pa.int64()),
        pa.field("structural_verdict", pa.string()),  # null: the case declares no cue
        pa.field("structural_reason", pa.string()),
        pa.field("cues_surfaced", pa.int64()),
        pa.field("cues_failed", pa.int64()),
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


def cases_polars(catalog: Catalog) -> pl.Schema:
    """The Polars schema of the ``cases`` table of a run measured with ``catalog``."""
    return CASES if catalog is CATALOG else polars_schema(cases_schema(catalog))


def polars_schema(schema: pa.Schema) -> pl.Schema:
    """The Polars schema of an Arrow schema (the one derivation used everywhere)."""
    # Not ``schema.empty_table()``: that drags pandas in through pyarrow's
    # pandas metadata hook, and the package promises a pandas-free import.
    frame = pl.from_arrow(pa.Table.from_batches([], schema=schema))
    assert isinstance(frame, pl.DataFrame)
    return frame.schema


EXPECTED_SCHEMA: Final = pa.schema(
    [
        pa.field("case_id", pa.string()),
        pa.field("case_index", pa.int32()),
        pa.field("kind", pa.string()),  # source | concept | label | association | citation
        pa.field("entry_index", pa.int32()),
        pa.field("item_index", pa.int32()),
        pa.field("source", pa.string()),
        pa.field("paragraph", pa.int64()),
        pa.field("relevance", pa.int64()),
        pa.field("text", pa.string()),
        pa.field("subject", pa.string()),
        pa.field("label", pa.string()),
        pa.field("object", pa.string()),
        pa.field("section_declared", pa.bool_()),
        pa.field("section", pa.string()),
        pa.field("quote", pa.string()),
    ]
)
"""The eval set's ``expected`` frame: one row per expected item (EVALUATE.md §1),
keyed with the same types as the run tables, so matching joins without a cast."""


@dataclass(frozen=True)
class TableSpec:
    """One table of a run: its name (the Parquet file stem) and its Arrow schema."""

    name: str
    schema: pa.Schema
    grain: str

    @property
    def file_name(self) -> str:
        """``<name>.parquet`` inside a stored run directory."""
        return f"{self.name}.parquet"

    @property
    def polars(self) -> pl.Schema:
        """The Polars schema derived from the Arrow one."""
        return polars_schema(self.schema)

    def empty(self) -> pl.DataFrame:
        """A frame with no row and this table's columns."""
        return pl.DataFrame(schema=self.polars)


TABLES: Final[tuple[TableSpec, ...]] = (
    TableSpec("calls", CALLS_SCHEMA, "one row per HTTP call"),
    TableSpec("case_lanes", CASE_LANES_SCHEMA, "one row per case"),
    TableSpec("hits", HITS_SCHEMA, "one row per served hit (never its text)"),
    TableSpec("resolutions", RESOLUTIONS_SCHEMA, "one row per resolved name of a cue"),
    TableSpec("probes", PROBES_SCHEMA, "one row per expected association"),
    TableSpec("attributions", ATTRIBUTIONS_SCHEMA, "one row per attribution of a query"),
    TableSpec("citation_checks", CITATION_CHECKS_SCHEMA, "one row per expected citation"),
    TableSpec(
        "evidence_items",
        EVIDENCE_ITEMS_SCHEMA,
        "one row per evidence candidate of an assembled case (admitted, or omitted and why)",
    ),
    TableSpec("cases", CASES_SCHEMA, "one row per case, every per-case metric a column"),
    TableSpec("metrics", METRICS_SCHEMA, "one row per aggregate metric"),
    TableSpec(
        "refusal_lanes", REFUSAL_LANES_SCHEMA, "one row per must-refuse case: what its probes got"
    ),
    TableSpec("refusal_cases", REFUSAL_CASES_SCHEMA, "one row per must-refuse case: its verdicts"),
    TableSpec(
        "answer_checks",
        ANSWER_CHECKS_SCHEMA,
        "one row per declared answer of a case whose first lane completed (--answers; "
        "never the served text)",
    ),
)
"""Every table a run stores, in the run store's file order."""

TABLE: Final[Mapping[str, TableSpec]] = {spec.name: spec for spec in TABLES}


def table_specs(catalog: Catalog = CATALOG) -> tuple[TableSpec, ...]:
    """:data:`TABLES` for a run measured with ``catalog`` (its ``cases`` columns)."""
    if catalog is CATALOG:
        return TABLES
    cases = TableSpec("cases", cases_schema(catalog), TABLE["cases"].grain)
    return tuple(cases if spec.name == "cases" else spec for spec in TABLES)


SCORE_TABLES: Final = ("cases", "metrics", "refusal_cases")
OPTIONAL_TABLES: Final = ("answer_checks",)
"""Tables a run stores only when they have rows (added after the store's first version)."""
"""The tables the scorer adds; the others come from the lanes (:class:`RunTables`)."""

ARROW_SCHEMAS: Final[Mapping[str, pa.Schema]] = {spec.name: spec.schema for spec in TABLES}

CALLS = TABLE["calls"].polars
CASE_LANES = TABLE["case_lanes"].polars
HITS = TABLE["hits"].polars
RESOLUTIONS = TABLE["resolutions"].polars
PROBES = TABLE["probes"].polars
ATTRIBUTIONS = TABLE["attributions"].polars
CITATION_CHECKS = TABLE["citation_checks"].polars
EVIDENCE_ITEMS = TABLE["evidence_items"].polars
CASES = TABLE["cases"].polars
METRICS = TABLE["metrics"].polars
REFUSAL_LANES = TABLE["refusal_lanes"].polars
REFUSAL_CASES = TABLE["refusal_cases"].polars
ANSWER_CHECKS = TABLE["answer_checks"].polars
EXPECTED = polars_schema(EXPECTED_SCHEMA)


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
    """The lane-level frames of one run (the scorer adds ``cases`` and ``metrics``).

    Its frame fields are exactly the lane tables of :data:`TABLES`, in order.
    """

    run_id: str
    calls: pl.DataFrame
    case_lanes: pl.DataFrame
    hits: pl.DataFrame
    resolutions: pl.DataFrame
    probes: pl.DataFrame
    attributions: pl.DataFrame
    citation_checks: pl.DataFrame
    evidence_items: pl.DataFrame
    refusal_lanes: pl.DataFrame
    answer_checks: pl.DataFrame = dataclasses.field(
        default_factory=lambda: pl.DataFrame(schema=ANSWER_CHECKS)
    )

    def frames(self) -> dict[str, pl.DataFrame]:
        """Table name -> frame, in the run store's file order; ``answer_checks``
        only when it has rows (a run given ``--answers``), so a run without one
        stores exactly the files it always did."""
        return {
            name: getattr(self, name)
            for name in lane_table_names()
            if name not in OPTIONAL_TABLES or getattr(self, name).height
        }

    def of_population(self, population: str) -> RunTables:
        """These tables with only ``population``'s rows in ``calls``, ``hits``,
        ``resolutions`` and ``evidence_items`` (the eval-only tables are kept as
        they are). A row with no population (a run stored before the column
        existed) is an eval row."""
        kept = pl.col("population").fill_null(POPULATION_EVAL) == population
        return replace(
            self,
            calls=self.calls.filter(kept),
            hits=self.hits.filter(kept),
            resolutions=self.resolutions.filter(kept),
            evidence_items=self.evidence_items.filter(kept),
        )

    @classmethod
    def from_frames(cls, run_id: str, frames: Mapping[str, pl.DataFrame]) -> RunTables:
        """Lane tables from frames by name, each conformed to its schema; a table
        missing from ``frames`` is empty."""
        conformed: dict[str, Any] = {
            name: conform(frames[name], TABLE[name].polars)
            if name in frames
            else TABLE[name].empty()
            for name in lane_table_names()
        }
        return cls(run_id=run_id, **conformed)


def lane_table_names() -> tuple[str, ...]:
    """The tables the lanes produce, in the run store's file order."""
    return tuple(spec.name for spec in TABLES if spec.name not in SCORE_TABLES)


def metrics_frame(
    metrics: Mapping[str, Mapping[str, Any]],
    run_id: str,
    statistics: Mapping[str, str] | None = None,
) -> pl.DataFrame:
    """The ``metrics`` table from evaluation.json's ``metrics`` map: one row per metric.

    A metric's shape comes from ``statistics`` (e.g. an artifact's own
    ``definitions``) or the catalog — never from the value's keys.
    """
    known: dict[str, str] = {**CATALOG.statistics(), **(statistics or {})}
    rows = [
        {"run_id": run_id, "metric": name, "statistic": known.get(name), **value}
        for name, value in metrics.items()
    ]
    if not rows:
        return TABLE["metrics"].empty()
    return conform(pl.from_dicts(rows, infer_schema_length=None), METRICS)

"""The run's tables, each declared once: :data:`TABLES`, a list of name -> Polars schema.

Every HTTP call of a run is one row of ``calls``; what the calls returned lands
in ``case_lanes`` (one row per case), ``hits``, ``resolutions``, ``probes``,
``attributions``, ``citation_checks`` and, with ``--assembly``,
``evidence_items``. The scorer adds ``cases`` (one row per case, every
per-case metric a column) and ``metrics`` (one row per aggregate).
With ``--must-refuse`` the probes' calls, hits and cue resolutions join the same
three tables under ``population`` ``must_refuse``, ``refusal_lanes`` holds what
each probe got and the scorer adds ``refusal_cases`` (the verdicts).
The Arrow schemas (derived on demand: :func:`arrow_schema`), the Parquet file
names, empty frames and the run-tables type all derive from :data:`TABLES`, so
Parquet files and frames can never drift apart. A per-case metric's column
(name and type) comes from the catalog. The eval set's ``expected`` frame is
declared here too, with the key types the scorer joins on."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Final, TypeAlias

import polars as pl

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

if TYPE_CHECKING:
    import pyarrow as pa

Column: TypeAlias = tuple[str, "pl.DataType | type[pl.DataType]"]
"""One declared column: its name and Polars dtype."""

_RUN: list[Column] = [("run_id", pl.String), ("case_index", pl.Int32)]

_CASE: list[Column] = [*_RUN, ("case_id", pl.String)]

POPULATION_EVAL: Final = "eval"
POPULATION_MUST_REFUSE: Final = "must_refuse"
POPULATIONS: Final = (POPULATION_EVAL, POPULATION_MUST_REFUSE)

# Which file a row's case comes from (ABSTENTION.md §3.6): eval.jsonl, or the
# must-refuse file. Always written (``eval`` in a run without --must-refuse),
# so every stored run of a context shares one schema; ``case_index`` is the
# position within that file, so (population, case_index) is the row's case.
_POPULATION: Column = ("population", pl.String)

CALLS_SCHEMA = pl.Schema(
    [
        *_CASE,
        ("seq", pl.Int32),
        ("lane", pl.String),
        ("endpoint", pl.String),
        ("item_index", pl.Int32),
        ("position", pl.String),
        ("outcome", pl.String),
        ("http_status", pl.Int32),
        ("latency_ms", pl.Int64),
        ("error", pl.String),
        _POPULATION,
        # The 0-based repetition of the case the call belongs to (run --repeat N
        # sends every eval case N times; ``seq`` counts within one repetition).
        # Always written, 0 in a run without --repeat (and for every must-refuse
        # probe), so every stored run of a context shares one schema; null only
        # in a run stored before the column existed.
        ("repeat", pl.Int32),
    ]
)

_PLAN_FIELDS: list[Column] = [
    ("plan_context", pl.String),
    ("plan_bm25_ran", pl.Boolean),
    ("plan_bm25_reason", pl.String),
    ("plan_bm25_floor", pl.Float32),
    ("plan_vector_ran", pl.Boolean),
    ("plan_vector_reason", pl.String),
    ("plan_vector_floor", pl.Float32),
    ("plan_filter_eligible_sources", pl.Int64),
    ("plan_filter_total_sources", pl.Int64),
]

CASE_LANES_SCHEMA = pl.Schema(
    [
        *_CASE,
        ("query", pl.String),
        ("cues", pl.List(pl.String)),
        ("limit", pl.Int64),
        # The case's options.tags (null: not recorded, e.g. a run imported from
        # an evaluation.json, which does not carry tags).
        ("tags", pl.List(pl.String)),
        ("passage_outcome", pl.String),
        ("passage_message", pl.String),
        ("passage_latency_ms", pl.Int64),
        ("hit_count", pl.Int64),
        *_PLAN_FIELDS,
        ("structural_ran", pl.Boolean),
        ("citation_count", pl.Int64),
        # Assembly / budget room (EVALUATE.md §7); null in a plain baseline run.
        ("evidence_outcome", pl.String),
        ("evidence_message", pl.String),
        ("evidence_latency_ms", pl.Int64),
        ("reranker_ran", pl.Boolean),
        ("reranker_reason", pl.String),
        ("budget_items_used", pl.Int64),
        ("budget_bytes_used", pl.Int64),
        ("budget_tokens_used", pl.Int64),
        ("budget_max_items", pl.Int64),
        ("budget_max_bytes", pl.Int64),
        ("budget_max_tokens", pl.Int64),
        ("budget_omitted_total", pl.Int64),
        # Omissions a budget ceiling caused (EVALUATE.md §5.2 budget.omitted_rate).
        ("budget_omitted_by_budget", pl.Int64),
    ]
)

HITS_SCHEMA = pl.Schema(
    [
        *_CASE,
        ("rank", pl.Int32),  # 0-based position in passage.hits
        ("source", pl.String),
        ("paragraph", pl.Int64),
        ("score", pl.Float32),
        ("bm25_rank", pl.Int32),
        ("bm25_score", pl.Float32),
        ("vector_rank", pl.Int32),
        ("vector_score", pl.Float32),
        _POPULATION,
    ]
)

RESOLUTIONS_SCHEMA = pl.Schema(
    [
        *_CASE,
        ("cue_index", pl.Int32),  # position in structural.cues
        ("cue", pl.String),
        ("kind", pl.String),
        ("tier", pl.String),
        ("error", pl.String),
        ("latency_ms", pl.Int64),
        # One row per resolved name; a cue that resolved nothing keeps one row
        # with rank/name null so its latency and error stay visible.
        ("rank", pl.Int32),
        ("name", pl.String),
        _POPULATION,
        # The resolver's match kind of the name (exact, alias, containment, fuzzy,
        # …) where a must-refuse cue probe records it; null for eval rows.
        ("match_kind", pl.String),
    ]
)

_POSITION_FIELDS: list[Column] = [
    field
    for position in ("subject", "label", "object")
    for field in (
        (f"{position}_outcome", pl.String),
        (f"{position}_name", pl.String),
        (f"{position}_tier", pl.String),
        (f"{position}_candidates", pl.List(pl.String)),
        (f"{position}_message", pl.String),
        (f"{position}_latency_ms", pl.Int64),
    )
]

PROBES_SCHEMA = pl.Schema(
    [
        *_CASE,
        ("association_index", pl.Int32),
        ("subject_cue", pl.String),
        ("label_cue", pl.String),
        ("object_cue", pl.String),
        *_POSITION_FIELDS,
        ("query_outcome", pl.String),  # null: the query was never called
        ("query_total", pl.Int64),
        ("query_matches", pl.Int64),
        ("query_message", pl.String),
        ("query_latency_ms", pl.Int64),
    ]
)

ATTRIBUTIONS_SCHEMA = pl.Schema(
    [
        *_CASE,
        ("association_index", pl.Int32),
        ("attribution_index", pl.Int32),
        ("source", pl.String),
        ("paragraph", pl.Int64),  # null: attribution without a paragraph
    ]
)

CITATION_CHECKS_SCHEMA = pl.Schema(
    [
        *_CASE,
        ("citation_index", pl.Int32),
        ("source", pl.String),
        ("paragraph", pl.Int64),
        ("served", pl.Boolean),
        ("outcome", pl.String),
        ("section_check", pl.String),  # null when unresolved
        ("section_expected", pl.String),  # declared value (null = declared null)
        ("quote_declared", pl.String),
        ("quote_matched", pl.Boolean),
        ("code", pl.String),
        ("message", pl.String),
        ("latency_ms", pl.Int64),
    ]
)


EVIDENCE_ITEMS_SCHEMA = pl.Schema(
    [
        *_CASE,
        ("item_index", pl.Int32),  # admitted items first, then the listed omissions
        ("candidate_id", pl.String),  # kind, NUL, canonical key (HTTP.md §6.9)
        ("kind", pl.String),  # association | passage | community (open)
        ("admitted", pl.Boolean),
        ("fused_rank", pl.Int64),  # null for an omitted candidate
        ("source", pl.String),  # the item's own locator; null for an association
        ("paragraph", pl.Int64),
        # null when not recorded (a run read back from evaluation.json) or omitted
        (
            "lane_ranks",
            pl.List(pl.Struct({"lane": pl.String, "rank": pl.Int64})),
        ),
        (
            "citation_refs",
            pl.List(pl.Struct({"source": pl.String, "paragraph": pl.Int64})),
        ),
        ("omitted_reason", pl.String),  # null when admitted
        ("duplicate_of", pl.String),
        _POPULATION,
    ]
)


def _metric(name: str, catalog: Catalog) -> Column:
    """The ``cases`` column of a per-case metric, as the catalog declares it."""
    case_field = catalog.per_case[name]
    return (case_field.column, case_field.dtype)


def cases_schema(catalog: Catalog = CATALOG) -> pl.Schema:
    """The ``cases`` table: one row per case, every per-case metric a column.

    The columns of the 31 metrics keep their documented order; a per-case
    metric a catalog adds is appended, typed as the catalog declares it.
    """

    def metric(name: str) -> Column:
        return _metric(name, catalog)

    listed: list[Column] = [
        *_CASE,
        ("passage_outcome", pl.String),
        metric("latency.passage_ms"),
        ("structural_ran", pl.Boolean),
        ("recall_expected_total", pl.Int64),
        ("recall_matched", pl.Int64),
        metric("recall.recall_at_k"),
        metric("recall.mrr"),
        metric("recall.ndcg"),
        *[
            field
            for block in ("concepts", "labels", "associations")
            for field in (
                (f"coverage_{block}_expected", pl.Int64),
                (f"coverage_{block}_matched", pl.Int64),
                metric(f"coverage.{block}"),
            )
        ],
        ("lane_cross_structural_hit", pl.Boolean),
        ("lane_cross_passage_hit", pl.Boolean),
        ("citations_expected_total", pl.Int64),
        ("citations_matched", pl.Int64),
        metric("citations.recall"),
        ("citations_valid", pl.Int64),
        metric("citations.locator_validity"),
        ("missed", pl.List(pl.String)),
        ("missed_truncated", pl.Int64),
        metric("diversity.sources"),
        metric("latency.evidence_ms"),
        metric("budget.items_used"),
        metric("budget.bytes_used"),
        metric("budget.tokens_used"),
        ("budget_omitted_total", pl.Int64),
        # ABSTENTION.md §3.6/§3.7: the must-refuse rule applied to the case's own
        # hits; null in a run without --must-refuse and outside the answerable
        # population (a declared relevant source, a completed passage lane).
        ("answerability_verdict", pl.String),
        ("answerability_reason", pl.String),
        ("offered", pl.Boolean),
        ("supported", pl.Boolean),
    ]
    if set(ANSWERS_METRICS) <= set(catalog):
        # The answers block's counts (--answers); its three values follow as metrics.
        listed += [
            (ANSWERS_BLOCK, pl.Int64),
            ("answers_found", pl.Int64),
            ("answers_first_rank", pl.Int64),
        ]
    names = {name for name, _ in listed}
    added = [
        metric(name) for name in catalog.per_case if catalog.per_case[name].column not in names
    ]
    if set(STABILITY_METRICS) <= set(catalog):
        # run --repeat N (N > 1), last: how many repetitions, whether the compared
        # metrics differed across them, and which did (in compare's order).
        added += [
            (STABILITY_BLOCK, pl.Int64),
            (STABILITY_UNSTABLE, pl.Boolean),
            (STABILITY_DIFFERS, pl.List(pl.String)),
        ]
    return pl.Schema([*listed, *added])


CASES_SCHEMA = cases_schema()

ANSWER_CHECKS_SCHEMA = pl.Schema(
    [
        *_CASE,
        ("answer_index", pl.Int32),  # the answer's position in the case's list
        ("found", pl.Boolean),
        ("rank", pl.Int32),  # 1-based rank of the first matching hit; null: not found
        ("match", pl.String),  # normalized | tokens
    ]
)


REFUSAL_LANES_SCHEMA = pl.Schema(
    [
        *_CASE,
        ("kind", pl.String),  # out_of_corpus | adjacent | unspecified
        ("why", pl.String),  # the author's own note, never corpus text
        ("query", pl.String),
        ("cues", pl.List(pl.String)),
        ("limit", pl.Int64),
        ("floor", pl.Float32),  # options.floor as declared
        ("passage_outcome", pl.String),
        ("passage_message", pl.String),
        ("passage_latency_ms", pl.Int64),
        ("hit_count", pl.Int64),
        *_PLAN_FIELDS,
        ("structural_ran", pl.Boolean),
        # The evidence probe (--assembly): assembled | failed, and the package's
        # uncapped omitted_total; null in baseline mode.
        ("evidence_outcome", pl.String),
        ("omitted_total", pl.Int64),
    ]
)

REFUSAL_CASES_SCHEMA = pl.Schema(
    [
        *_CASE,
        ("kind", pl.String),
        ("verdict", pl.String),  # abstained | surfaced | undetermined | failed
        ("reason", pl.String),  # null only when abstained
        ("surfaced_by", pl.String),  # passage | evidence | structural; null unless surfaced
        # The passage probe's verdict, or under --assembly the evidence probe's.
        ("passage_verdict", pl.String),
        ("passage_reason", pl.String),
        ("hits_served", pl.Int64),
        ("vector_hits", pl.Int64),
        ("bm25_only_hits", pl.Int64),
        ("structural_verdict", pl.String),  # null: the case declares no cue
        ("structural_reason", pl.String),
        ("cues_surfaced", pl.Int64),
        ("cues_failed", pl.Int64),
    ]
)

METRICS_SCHEMA = pl.Schema(
    [
        ("run_id", pl.String),
        ("metric", pl.String),
        ("statistic", pl.String),  # distribution | ratio | count
        ("n", pl.Int64),
        ("value", pl.Float64),  # ratio / count
        ("numerator", pl.Int64),  # ratio
        ("min", pl.Float64),
        ("p50", pl.Float64),
        ("p90", pl.Float64),
        ("p99", pl.Float64),
        ("max", pl.Float64),
        ("mean", pl.Float64),
        ("sum", pl.Float64),
    ]
)


def cases_polars(catalog: Catalog) -> pl.Schema:
    """The Polars schema of the ``cases`` table of a run measured with ``catalog``."""
    return CASES if catalog is CATALOG else cases_schema(catalog)


def arrow_schema(schema: pl.Schema) -> pa.Schema:
    """The Arrow schema of a declared Polars one (the one derivation used
    everywhere pyarrow reads a table): plain strings and lists, the types the
    run store has always declared to Arrow readers.

    pyarrow is imported here, on first use: a run never needs it (its tables
    are Polars frames, written by Polars' own Parquet writer)."""
    import pyarrow as pa

    exported = pl.DataFrame(schema=schema).to_arrow().schema
    return pa.schema([field.with_type(plain_arrow(field.type)) for field in exported])


def plain_arrow(kind: pa.DataType) -> pa.DataType:
    """``kind`` with its large lists and strings (Polars' export, and the hint
    Polars' Parquet writer stores) as the plain ones the declared schemas use."""
    import pyarrow as pa

    if pa.types.is_large_list(kind) or pa.types.is_list(kind):
        # The item keeps its name: Parquet's "element", or Arrow's "item".
        return pa.list_(kind.value_field.with_type(plain_arrow(kind.value_type)))
    if pa.types.is_struct(kind):
        return pa.struct([field.with_type(plain_arrow(field.type)) for field in kind])
    if pa.types.is_large_string(kind) or pa.types.is_string_view(kind):
        return pa.string()
    return kind


EXPECTED: Final = pl.Schema(
    [
        ("case_id", pl.String),
        ("case_index", pl.Int32),
        ("kind", pl.String),  # source | concept | label | association | citation
        ("entry_index", pl.Int32),
        ("item_index", pl.Int32),
        ("source", pl.String),
        ("paragraph", pl.Int64),
        ("relevance", pl.Int64),
        ("text", pl.String),
        ("subject", pl.String),
        ("label", pl.String),
        ("object", pl.String),
        ("section_declared", pl.Boolean),
        ("section", pl.String),
        ("quote", pl.String),
    ]
)
"""The eval set's ``expected`` frame: one row per expected item (EVALUATE.md §1),
keyed with the same types as the run tables, so matching joins without a cast."""


@dataclass(frozen=True)
class TableSpec:
    """One table of a run: its name (the Parquet file stem) and its declared
    Polars schema (the Arrow one derives from it, :attr:`arrow`)."""

    name: str
    polars: pl.Schema
    grain: str

    @property
    def file_name(self) -> str:
        """``<name>.parquet`` inside a stored run directory."""
        return f"{self.name}.parquet"

    @property
    def arrow(self) -> pa.Schema:
        """The Arrow schema of this table (:func:`arrow_schema`; imports pyarrow)."""
        return arrow_schema(self.polars)

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

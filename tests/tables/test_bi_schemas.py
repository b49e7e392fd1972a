"""BI export: the run store's table names, column names and types are pinned.

Notebooks, dashboards and BI tools read ``runs/context=<ctx>/run=<id>/<table>.parquet``
directly, so a renamed column or a changed type breaks them silently. Any change
to a stored schema must be deliberate: update this list, the table reference of
docs/store.md, and say so in the changelog.
"""

from __future__ import annotations

import io
from pathlib import Path

import polars as pl
import pyarrow.parquet as pq
import pytest
from support.documents import evaluation_document, write_document

from taguru_eval.analyst import ingest
from taguru_eval.tables import TABLE, TABLES
from taguru_eval.tables.schemas import plain_arrow

PINNED: dict[str, list[tuple[str, str]]] = {
    "calls": [
        ("run_id", "string"),
        ("case_index", "int32"),
        ("case_id", "string"),
        ("seq", "int32"),
        ("lane", "string"),
        ("endpoint", "string"),
        ("item_index", "int32"),
        ("position", "string"),
        ("outcome", "string"),
        ("http_status", "int32"),
        ("latency_ms", "int64"),
        ("error", "string"),
        ("population", "string"),
        # The case's 0-based repetition (run --repeat N); 0 in a run without it.
        ("repeat", "int32"),
    ],
    "case_lanes": [
        ("run_id", "string"),
        ("case_index", "int32"),
        ("case_id", "string"),
        ("query", "string"),
        ("cues", "list<item: string>"),
        ("limit", "int64"),
        # options.tags of the case, for per-tag slices (issue 13); null when the
        # run was imported from an evaluation.json (the artifact has no tags).
        ("tags", "list<item: string>"),
        ("passage_outcome", "string"),
        ("passage_message", "string"),
        ("passage_latency_ms", "int64"),
        ("hit_count", "int64"),
        ("plan_context", "string"),
        ("plan_bm25_ran", "bool"),
        ("plan_bm25_reason", "string"),
        ("plan_bm25_floor", "float"),
        ("plan_vector_ran", "bool"),
        ("plan_vector_reason", "string"),
        ("plan_vector_floor", "float"),
        ("plan_filter_eligible_sources", "int64"),
        ("plan_filter_total_sources", "int64"),
        ("structural_ran", "bool"),
        ("citation_count", "int64"),
        ("evidence_outcome", "string"),
        ("evidence_message", "string"),
        ("evidence_latency_ms", "int64"),
        ("reranker_ran", "bool"),
        ("reranker_reason", "string"),
        ("budget_items_used", "int64"),
        ("budget_bytes_used", "int64"),
        ("budget_tokens_used", "int64"),
        ("budget_max_items", "int64"),
        ("budget_max_bytes", "int64"),
        ("budget_max_tokens", "int64"),
        ("budget_omitted_total", "int64"),
        ("budget_omitted_by_budget", "int64"),
    ],
    "hits": [
        ("run_id", "string"),
        ("case_index", "int32"),
        ("case_id", "string"),
        ("rank", "int32"),
        ("source", "string"),
        ("paragraph", "int64"),
        ("score", "float"),
        ("bm25_rank", "int32"),
        ("bm25_score", "float"),
        ("vector_rank", "int32"),
        ("vector_score", "float"),
        ("population", "string"),
    ],
    "resolutions": [
        ("run_id", "string"),
        ("case_index", "int32"),
        ("case_id", "string"),
        ("cue_index", "int32"),
        ("cue", "string"),
        ("kind", "string"),
        ("tier", "string"),
        ("error", "string"),
        ("latency_ms", "int64"),
        ("rank", "int32"),
        ("name", "string"),
        ("population", "string"),
        ("match_kind", "string"),
    ],
    "probes": [
        ("run_id", "string"),
        ("case_index", "int32"),
        ("case_id", "string"),
        ("association_index", "int32"),
        ("subject_cue", "string"),
        ("label_cue", "string"),
        ("object_cue", "string"),
        ("subject_outcome", "string"),
        ("subject_name", "string"),
        ("subject_tier", "string"),
        ("subject_candidates", "list<item: string>"),
        ("subject_message", "string"),
        ("subject_latency_ms", "int64"),
        ("label_outcome", "string"),
        ("label_name", "string"),
        ("label_tier", "string"),
        ("label_candidates", "list<item: string>"),
        ("label_message", "string"),
        ("label_latency_ms", "int64"),
        ("object_outcome", "string"),
        ("object_name", "string"),
        ("object_tier", "string"),
        ("object_candidates", "list<item: string>"),
        ("object_message", "string"),
        ("object_latency_ms", "int64"),
        ("query_outcome", "string"),
        ("query_total", "int64"),
        ("query_matches", "int64"),
        ("query_message", "string"),
        ("query_latency_ms", "int64"),
    ],
    "attributions": [
        ("run_id", "string"),
        ("case_index", "int32"),
        ("case_id", "string"),
        ("association_index", "int32"),
        ("attribution_index", "int32"),
        ("source", "string"),
        ("paragraph", "int64"),
    ],
    "citation_checks": [
        ("run_id", "string"),
        ("case_index", "int32"),
        ("case_id", "string"),
        ("citation_index", "int32"),
        ("source", "string"),
        ("paragraph", "int64"),
        ("served", "bool"),
        ("outcome", "string"),
        ("section_check", "string"),
        ("section_expected", "string"),
        ("quote_declared", "string"),
        ("quote_matched", "bool"),
        ("code", "string"),
        ("message", "string"),
        ("latency_ms", "int64"),
    ],
    "evidence_items": [
        ("run_id", "string"),
        ("case_index", "int32"),
        ("case_id", "string"),
        ("item_index", "int32"),
        ("candidate_id", "string"),
        ("kind", "string"),
        ("admitted", "bool"),
        ("fused_rank", "int64"),
        ("source", "string"),
        ("paragraph", "int64"),
        ("lane_ranks", "list<item: struct<lane: string, rank: int64>>"),
        ("citation_refs", "list<item: struct<source: string, paragraph: int64>>"),
        ("omitted_reason", "string"),
        ("duplicate_of", "string"),
        ("population", "string"),
    ],
    "cases": [
        ("run_id", "string"),
        ("case_index", "int32"),
        ("case_id", "string"),
        ("passage_outcome", "string"),
        ("passage_latency_ms", "int64"),
        ("structural_ran", "bool"),
        ("recall_expected_total", "int64"),
        ("recall_matched", "int64"),
        ("recall_at_k", "double"),
        ("mrr", "double"),
        ("ndcg", "double"),
        ("coverage_concepts_expected", "int64"),
        ("coverage_concepts_matched", "int64"),
        ("coverage_concepts", "double"),
        ("coverage_labels_expected", "int64"),
        ("coverage_labels_matched", "int64"),
        ("coverage_labels", "double"),
        ("coverage_associations_expected", "int64"),
        ("coverage_associations_matched", "int64"),
        ("coverage_associations", "double"),
        ("lane_cross_structural_hit", "bool"),
        ("lane_cross_passage_hit", "bool"),
        ("citations_expected_total", "int64"),
        ("citations_matched", "int64"),
        ("citations_recall", "double"),
        ("citations_valid", "int64"),
        ("citations_locator_validity", "double"),
        ("missed", "list<item: string>"),
        ("missed_truncated", "int64"),
        ("diversity_sources", "int64"),
        ("evidence_latency_ms", "int64"),
        ("budget_items_used", "int64"),
        ("budget_bytes_used", "int64"),
        ("budget_tokens_used", "int64"),
        ("budget_omitted_total", "int64"),
        ("answerability_verdict", "string"),
        ("answerability_reason", "string"),
        ("offered", "bool"),
        ("supported", "bool"),
    ],
    "metrics": [
        ("run_id", "string"),
        ("metric", "string"),
        ("statistic", "string"),
        ("n", "int64"),
        ("value", "double"),
        ("numerator", "int64"),
        ("min", "double"),
        ("p50", "double"),
        ("p90", "double"),
        ("p99", "double"),
        ("max", "double"),
        ("mean", "double"),
        ("sum", "double"),
    ],
    "refusal_lanes": [
        ("run_id", "string"),
        ("case_index", "int32"),
        ("case_id", "string"),
        ("kind", "string"),
        ("why", "string"),
        ("query", "string"),
        ("cues", "list<item: string>"),
        ("limit", "int64"),
        ("floor", "float"),
        ("passage_outcome", "string"),
        ("passage_message", "string"),
        ("passage_latency_ms", "int64"),
        ("hit_count", "int64"),
        ("plan_context", "string"),
        ("plan_bm25_ran", "bool"),
        ("plan_bm25_reason", "string"),
        ("plan_bm25_floor", "float"),
        ("plan_vector_ran", "bool"),
        ("plan_vector_reason", "string"),
        ("plan_vector_floor", "float"),
        ("plan_filter_eligible_sources", "int64"),
        ("plan_filter_total_sources", "int64"),
        ("structural_ran", "bool"),
        ("evidence_outcome", "string"),
        ("omitted_total", "int64"),
    ],
    "refusal_cases": [
        ("run_id", "string"),
        ("case_index", "int32"),
        ("case_id", "string"),
        ("kind", "string"),
        ("verdict", "string"),
        ("reason", "string"),
        ("surfaced_by", "string"),
        ("passage_verdict", "string"),
        ("passage_reason", "string"),
        ("hits_served", "int64"),
        ("vector_hits", "int64"),
        ("bm25_only_hits", "int64"),
        ("structural_verdict", "string"),
        ("structural_reason", "string"),
        ("cues_surfaced", "int64"),
        ("cues_failed", "int64"),
    ],
    "answer_checks": [
        ("run_id", "string"),
        ("case_index", "int32"),
        ("case_id", "string"),
        ("answer_index", "int32"),
        ("found", "bool"),
        ("rank", "int32"),
        ("match", "string"),
    ],
}
OPTIONAL = ("answer_checks",)  # stored only by a run given --answers


def test_the_schema_catalogue_is_pinned() -> None:
    actual = {spec.name: [(field.name, str(field.type)) for field in spec.arrow] for spec in TABLES}
    assert list(actual) == list(PINNED)
    for name, columns in PINNED.items():
        assert actual[name] == columns, name


@pytest.fixture(scope="module")
def stored_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("bi")
    path = write_document(root / "evaluation.json", evaluation_document())
    return ingest.ingest(path, root / "runs").path


@pytest.mark.parametrize("table", [name for name in PINNED if name not in OPTIONAL])
def test_every_stored_parquet_file_has_the_pinned_schema(stored_run: Path, table: str) -> None:
    path = stored_run / f"{table}.parquet"
    # Read as dataset() reads it: Polars' writer stores an Arrow hint naming its
    # large strings and lists; the Parquet types under it are the plain ones.
    schema = pq.read_schema(path)
    read = [(f.name, str(plain_arrow(f.type))) for f in schema]
    # Parquet names a list's item "element"; the type is the same list<string>.
    assert [(name, kind.replace("list<element:", "list<item:")) for name, kind in read] == (
        PINNED[table]
    )
    # The Parquet schema itself (what DuckDB, Spark and every engine read) is
    # exactly the one pyarrow's writer gave the declared Arrow schema.
    frame = pl.read_parquet(path)
    by_pyarrow = io.BytesIO()
    pq.write_table(frame.to_arrow().cast(TABLE[table].arrow), by_pyarrow)
    assert pq.ParquetFile(path).schema.equals(pq.ParquetFile(by_pyarrow).schema)


def test_partition_layout(stored_run: Path) -> None:
    # <store>/context=<ctx>/run=<run_id>/<table>.parquet + evaluation.json.zst + run.json
    assert stored_run.name.startswith("run=")
    assert stored_run.parent.name == "context=demo"
    assert sorted(p.name for p in stored_run.iterdir()) == sorted(
        [f"{table}.parquet" for table in PINNED if table not in OPTIONAL]
        + ["evaluation.json.zst", "run.json"]
    )


def test_the_pin_covers_every_declared_table() -> None:
    assert list(PINNED) == [spec.name for spec in TABLES]
    for spec in TABLES:
        assert spec.polars.names() == [name for name, _ in PINNED[spec.name]]

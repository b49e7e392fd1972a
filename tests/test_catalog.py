"""The metric catalog (EVALUATE.md §5.3, GATE_AND_COMPARE.md §2.1, §3)."""

from __future__ import annotations

import json
import re

import pytest
from support.vectors import vector_doc

from taguru_eval import catalog
from taguru_eval.catalog import (
    BANNED_WORDS,
    CASE_SCOPED_METRICS,
    CATALOG,
    CATALOG_KEYS,
    COMPARISON_METRICS,
    CaseField,
    Catalog,
    MetricDefinition,
    definitions,
    statistic_of,
    statistics,
)
from taguru_eval.tables.schemas import CASES_SCHEMA

VECTORS = vector_doc("thresholds_validation")

# The exact `source` strings of EVALUATE.md §5.3 (facts, not prose).
EXPECTED_SOURCES = {
    "latency.passage_ms": "POST /contexts/{name}/sources/search",
    "latency.resolve_ms": "POST /contexts/{name}/resolve, POST /contexts/{name}/resolve_label",
    "latency.query_ms": "POST /contexts/{name}/query",
    "passage.failure_rate": "POST /contexts/{name}/sources/search",
    "structural.case_rate": "eval.jsonl case fields",
    "recall.recall_at_k": "eval.jsonl expected_sources, POST /contexts/{name}/sources/search",
    "recall.mrr": "eval.jsonl expected_sources, POST /contexts/{name}/sources/search",
    "recall.ndcg": "eval.jsonl expected_sources.relevance, POST /contexts/{name}/sources/search",
    "coverage.concepts": "eval.jsonl expected_concepts, POST /contexts/{name}/resolve",
    "coverage.labels": "eval.jsonl expected_labels, POST /contexts/{name}/resolve_label",
    "coverage.associations": "eval.jsonl expected_associations, POST /contexts/{name}/query",
    "citations.recall": (
        "eval.jsonl expected_citations, POST /contexts/{name}/sources/search, "
        "POST /contexts/{name}/query"
    ),
    "citations.locator_validity": "POST /contexts/{name}/citations",
    "citations.resolved": "POST /contexts/{name}/citations",
    "citations.no_source": "POST /contexts/{name}/citations",
    "citations.no_paragraph": "POST /contexts/{name}/citations",
    "citations.other": "POST /contexts/{name}/citations",
    "citations.section_match": (
        "eval.jsonl expected_citations.section, POST /contexts/{name}/citations"
    ),
    "citations.quote_match": "eval.jsonl expected_citations.quote, POST /contexts/{name}/citations",
    "latency.citation_ms": "POST /contexts/{name}/citations",
    "lanes.structural_hit": "derived from coverage.* and recall.recall_at_k",
    "lanes.passage_hit": "derived from coverage.* and recall.recall_at_k",
    "lanes.both": "derived from coverage.* and recall.recall_at_k",
    "lanes.neither": "derived from coverage.* and recall.recall_at_k",
    "diversity.sources": ("POST /contexts/{name}/sources/search, POST /contexts/{name}/evidence"),
    "latency.evidence_ms": "POST /contexts/{name}/evidence",
    "budget.items_used": "crate::api::evidence::budget",
    "budget.bytes_used": "crate::api::evidence::budget",
    "budget.tokens_used": "crate::api::evidence::budget",
    "budget.omitted_rate": "crate::api::evidence::budget, POST /contexts/{name}/evidence",
    "rerank.ran": "POST /contexts/{name}/evidence plan.reranker",
}

# Where EVALUATE.md §5.3 marks a caveat "yes".
EXPECTED_CAVEATS = {
    "latency.query_ms",
    "recall.recall_at_k",
    "recall.mrr",
    "recall.ndcg",
    "coverage.concepts",
    "coverage.labels",
    "coverage.associations",
    "citations.recall",
    "citations.locator_validity",
    "citations.section_match",
    "citations.quote_match",
    "latency.citation_ms",
    "lanes.structural_hit",
    "lanes.passage_hit",
    "diversity.sources",
    "latency.evidence_ms",
    "budget.items_used",
    "budget.bytes_used",
    "budget.tokens_used",
    "budget.omitted_rate",
    "rerank.ran",
}

EXPECTED_UNITS = {
    "source": {"diversity.sources"},
    "item": {"budget.items_used"},
    "byte": {"budget.bytes_used"},
    "token": {"budget.tokens_used"},
}


def test_catalog_keys_are_the_vector_catalog_in_spec_order() -> None:
    assert list(CATALOG) == VECTORS["catalog"]
    assert len(CATALOG) == 31
    assert frozenset(VECTORS["catalog"]) == CATALOG_KEYS


def test_case_scoped_and_comparison_lists_match_the_vectors_in_order() -> None:
    assert list(CASE_SCOPED_METRICS) == VECTORS["case_scoped_metrics"]
    assert list(COMPARISON_METRICS) == VECTORS["comparison_metrics"]


def test_comparison_list_is_the_case_scoped_list_minus_passage_latency() -> None:
    # GATE §3 invariant (scenario 76): a new case metric must join both deliberately.
    assert [m for m in CASE_SCOPED_METRICS if m != "latency.passage_ms"] == list(COMPARISON_METRICS)
    assert set(CASE_SCOPED_METRICS) - set(COMPARISON_METRICS) == {"latency.passage_ms"}


def test_every_case_scoped_name_is_a_catalog_name() -> None:
    assert set(CASE_SCOPED_METRICS) <= CATALOG_KEYS
    # Every bounded or compared metric says where its per-case value lives.
    assert set(CASE_SCOPED_METRICS) <= set(CATALOG.per_case)
    assert all(CATALOG[name].per_case is not None for name in CASE_SCOPED_METRICS)


def test_per_case_columns_are_unique_and_typed_in_the_cases_schema() -> None:
    columns = [field.column for field in CATALOG.per_case.values()]
    assert len(columns) == len(set(columns))
    schema = CASES_SCHEMA
    for case_field in CATALOG.per_case.values():
        assert schema[case_field.column] == case_field.dtype


def test_a_catalog_rejects_a_per_case_metric_it_cannot_order() -> None:
    orphan = MetricDefinition(
        "ratio", "distribution", ("case",), "d", "s", None, per_case=CaseField("x", ("x",))
    )
    with pytest.raises(ValueError, match="x"):
        Catalog({"x": orphan}, ())
    extended = CATALOG.with_metrics({"x": orphan})
    assert list(extended.per_case)[-1] == "x"
    assert "x" not in CATALOG.per_case


@pytest.mark.parametrize("name", ["latency.resolve_ms", "latency.query_ms", "latency.citation_ms"])
def test_multi_call_latencies_are_not_case_scoped(name: str) -> None:
    assert name in CATALOG_KEYS
    assert name not in CASE_SCOPED_METRICS


@pytest.mark.parametrize(
    "name",
    [
        "latency.evidence_ms",
        "budget.items_used",
        "budget.bytes_used",
        "budget.tokens_used",
    ],
)
def test_aggregate_only_distributions_are_not_case_scoped(name: str) -> None:
    assert CATALOG[name].scopes == ("case",)
    assert name not in CASE_SCOPED_METRICS


def test_statistics_and_scopes() -> None:
    distributions = [n for n, d in CATALOG.items() if d.statistic == "distribution"]
    ratios = [n for n, d in CATALOG.items() if d.statistic == "ratio"]
    assert len(distributions) == 17
    assert len(ratios) == 14
    for name, definition in CATALOG.items():
        expected_scope = ("case",) if definition.statistic == "distribution" else ("run",)
        assert definition.scopes == expected_scope, name
    # EVALUATE §5.3: distributions are latency.*, recall.*, coverage.*, two
    # citations, diversity.sources and three budget sizes; everything else is a ratio.
    pattern = re.compile(
        r"^(latency\.|recall\.|coverage\.|citations\.(recall|locator_validity)$"
        r"|diversity\.sources$|budget\.(items|bytes|tokens)_used$)"
    )
    assert {n for n in CATALOG if pattern.match(n)} == set(distributions)


def test_units() -> None:
    for name, definition in CATALOG.items():
        expected = next((unit for unit, names in EXPECTED_UNITS.items() if name in names), None)
        if expected is None:
            expected = "ms" if name.startswith("latency.") else "ratio"
        assert definition.unit == expected, name


def test_sources_are_exact() -> None:
    assert {name: d.source for name, d in CATALOG.items()} == EXPECTED_SOURCES


def test_caveats_exist_exactly_where_the_spec_marks_them() -> None:
    with_caveat = {name for name, d in CATALOG.items() if d.caveat is not None}
    assert with_caveat == EXPECTED_CAVEATS
    for definition in CATALOG.values():
        assert definition.description.strip()
        assert definition.caveat is None or definition.caveat.strip()


def test_no_banned_word_in_keys_descriptions_or_caveats() -> None:
    text = json.dumps(definitions()).lower()
    for word in BANNED_WORDS:
        assert word not in text
    assert set(BANNED_WORDS) == {
        "fused",
        "combined",
        "unified",
        "composite",
        "blended",
        "normalized_score",
    }


def test_definitions_are_key_sorted_with_fields_in_spec_order() -> None:
    defs = definitions()
    assert list(defs) == sorted(CATALOG)
    for name, entry in defs.items():
        assert list(entry) == ["unit", "statistic", "scopes", "description", "source", "caveat"]
        assert entry["scopes"] == list(CATALOG[name].scopes)
        assert entry["source"] == EXPECTED_SOURCES[name]
    # Serializable exactly as the artifact writes it.
    assert json.loads(json.dumps(defs)) == defs


def test_statistic_of() -> None:
    assert statistic_of("recall.recall_at_k") == "distribution"
    assert statistic_of("citations.resolved") == "ratio"
    with pytest.raises(KeyError):
        statistic_of("not.a.metric")
    assert statistics()["rerank.ran"] == "ratio"
    assert len(statistics()) == 31


def test_extra_definitions_extend_but_never_redefine() -> None:
    extra = {
        "abstention.false_answers": MetricDefinition(
            "case", "count", ("run",), "Surfaced must-refuse cases.", "must_refuse.jsonl", None
        )
    }
    defs = definitions(extra)
    assert len(defs) == 32
    assert list(defs) == sorted(defs)
    assert statistic_of("abstention.false_answers", extra) == "count"
    assert len(catalog.definitions()) == 31  # the base catalog is untouched
    with pytest.raises(ValueError, match=r"recall\.mrr"):
        definitions({"recall.mrr": extra["abstention.false_answers"]})


def test_case_metric_paths_read_validity_for_locator_validity() -> None:
    paths = {name: field.path for name, field in CATALOG.per_case.items()}
    assert paths["citations.locator_validity"] == ("citations", "validity", "value")
    assert paths["latency.passage_ms"] == ("passage", "latency_ms")
    assert paths["diversity.sources"] == ("diversity_sources",)

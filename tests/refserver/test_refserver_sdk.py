"""taguru's own Python SDK (PyPI ``taguru`` 0.9.x) against the reference server.

Real loopback HTTP through ``running_server``; every call goes through the
SDK's client and its decoder, so a key this server leaves out, or a type it
gets wrong, fails here the way it would fail an application written against
taguru. The server runs with the toy vector lane and the toy reranker, so the
optional fields of search hits, plans and embeddings status are decoded too.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from taguru import Context, Taguru

from taguru_refserver.serve import running_server

NAME = "sake"
KURA = "docs/kura.md"
KURA_TEXT = (
    "青嶺酒造は雲居県霧沢町の蔵元である。杜氏は高瀬である。\n\n仕込み水は霧沢の伏流水である。"
)


@pytest.fixture(scope="module")
def context() -> Iterator[Context]:
    with (
        running_server(None, vector_lane=True, reranker=True) as url,
        Taguru(url, retries=0) as client,
    ):
        assert client.contexts.create(NAME, description="sdk") is True
        ctx = client.context(NAME)
        stored = ctx.store_passages(
            {KURA: KURA_TEXT, "docs/other.md": "梅雨明けの空に入道雲が広がった。"},
            sections={KURA: [{"paragraph": 1, "section": "水"}]},
            locators={KURA: [{"paragraph": 0, "locator": {"kind": "page", "value": "1"}}]},
        )
        assert (stored.stored, stored.sections_stored, stored.locators_stored) == (2, 1, 1)
        outcome = ctx.add_associations(
            [
                {
                    "subject": "青嶺酒造",
                    "label": "杜氏",
                    "object": "高瀬",
                    "weight": 1.0,
                    "source": KURA,
                    "paragraph": 0,
                },
                {"subject": "高瀬", "label": "出身", "object": "南部", "weight": 2.0},
            ]
        )
        assert (outcome.applied, outcome.issues, outcome.schema_violations) == (2, [], 0)
        yield ctx


def test_resolve_and_resolve_label(context: Context) -> None:
    ctx = context
    concepts = ctx.resolve("青嶺", limit=5)
    assert [(c.name, c.kind, c.tier, c.score) for c in concepts] == [
        ("青嶺酒造", "containment", "lexical", 0.5)
    ]
    assert concepts[0].gloss == "青嶺酒造。杜氏は高瀬。"
    labels = ctx.resolve_label("杜氏")
    assert [(c.name, c.kind) for c in labels] == [("杜氏", "exact")]


def test_query_decodes_attributions_with_locator(context: Context) -> None:
    page = context.query(subject="青嶺酒造", label="杜氏", object="高瀬", limit=1)
    assert page.total == 1
    (match,) = page.matches
    (attribution,) = match.attributions
    assert (attribution.source, attribution.paragraph, attribution.locator.value) == (KURA, 0, "1")


def test_cite_passage_and_list_sources(context: Context) -> None:
    cited = context.cite_passage(KURA, 1)
    assert (cited.text, cited.section, cited.locator) == (
        "仕込み水は霧沢の伏流水である。",
        "水",
        None,
    )
    page = context.list_sources(limit=1000)
    assert page.total == 2
    assert page.sources == ["docs/kura.md", "docs/other.md"]
    assert page.entries[0].stored_at is not None


def test_search_passages_with_the_vector_lane(context: Context) -> None:
    page = context.search_passages("霧沢の伏流水", limit=3)
    lanes = page.plan.contexts[0].lanes
    assert lanes.bm25.ran is True
    assert (lanes.vector.ran, lanes.vector.floor) == (True, pytest.approx(0.35))
    top = page.hits[0]
    assert (top.source, top.paragraph) == (KURA, 1)
    assert top.lanes.bm25 is not None and top.lanes.vector is not None
    assert top.lanes.vector.rank == 1
    assert top.score == pytest.approx(2 / 61, rel=1e-6)


def test_embeddings_status_names_the_toy_model(context: Context) -> None:
    status = context.embeddings_status()
    assert status.provider_model == "refserver-toy-hash-v1"
    assert status.glosses is None
    assert (status.passages.model, status.passages.rows) == ("refserver-toy-hash-v1", 3)


def test_assemble_evidence_with_rerank(context: Context) -> None:
    package = context.assemble_evidence(
        ["青嶺酒造"],
        budget={"max_items": 10},
        rerank={"model": "refserver-toy-rerank-v1"},
    )
    kinds = [item.kind for item in package.items]
    assert kinds.count("association") == 2 and "passage" in kinds
    first = package.items[0]
    assert first.association is not None
    assert [(ref.source, ref.paragraph) for ref in first.citation_refs] == [(KURA, 0)]
    assert first.corroboration.sources == [KURA]
    assert [(c.source, c.paragraph) for c in package.citations] == [(KURA, 0)]
    assert package.citations[0].citation.locator.kind == "page"
    plan = package.plan
    assert (plan.reranker.configured, plan.reranker.ran) == (True, True)
    assert plan.reranker.model == "refserver-toy-rerank-v1"
    assert plan.lanes.query.reason == "no 'labels' given"
    assert plan.selection.diversity_tier_width == 2
    assert package.budget.limits.max_items == 10
    assert package.budget.items_used == len(package.items)


def test_assemble_evidence_reports_a_forced_provider_error(context: Context) -> None:
    package = context.assemble_evidence(
        "青嶺酒造", rerank={"model": "refserver-toy-rerank-fail:provider_error"}
    )
    reranker = package.plan.reranker
    assert (reranker.configured, reranker.ran, reranker.reason) == (True, False, "provider_error")
    assert package.items  # a degraded rerank never empties the package


def test_retract_association_and_source(context: Context) -> None:
    ctx = context
    ctx.add_associations([{"subject": "x", "label": "r", "object": "y", "weight": 1.0}])
    gone = ctx.retract_association("x", "r", "y")
    assert (gone.retracted, gone.attributions_removed) == (True, 0)
    again = ctx.retract_association("x", "r", "y")
    assert again.retracted is False
    preview = ctx.retract_source("docs/other.md", dry_run=True)
    assert (preview.associations_touched, preview.passage_removed) == (0, True)
    assert ctx.list_sources().total == 2


def test_schema_warn_mode_reaches_the_sdk_result() -> None:
    with running_server(None) as url, Taguru(url, retries=0) as client:
        client.contexts.create("typed")
        ctx = client.context("typed")
        installed = ctx.put_schema(
            {
                "schema": 1,
                "mode": "warn",
                "closed_labels": False,
                "types": {"Brewery": {}, "Person": {}},
                "relations": {"杜氏": {"domain": ["Brewery"], "range": ["Person"]}},
            }
        )
        assert installed.mode == "warn"
        assert ctx.get_schema().relations["杜氏"].domain == ["Brewery"]
        outcome = ctx.add_associations(
            [
                {"subject": "高瀬", "label": "schema:type", "object": "Person", "weight": 1.0},
                {"subject": "高瀬", "label": "杜氏", "object": "個人A", "weight": 1.0},
            ]
        )
        assert (outcome.applied, outcome.schema_violations) == (2, 1)
        assert (outcome.issues[0].kind, outcome.issues[0].path) == (
            "domain",
            "associations[1].subject",
        )
        # The SDK's DirectoryEntry has no schema_mode; the installed document moved config.
        assert client.contexts.get("typed").revision.config == 1

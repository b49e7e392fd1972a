"""Evidence assembly: fusion, selection, the toy reranker, activation and the route.

The recorded packages are replayed in test_contract_wire.py; these tests pin
the rules behind them on populations the fixtures do not cover.
"""

from __future__ import annotations

from typing import Any

import pytest
from support.refserver import context_path, in_process

from taguru_eval._base.text import F32
from taguru_refserver.activate import activate
from taguru_refserver.fusion import (
    EvidenceCandidate,
    FusedCandidate,
    association_candidate,
    fuse,
    passage_candidate,
)
from taguru_refserver.graph_writes import AssociationInput, assert_association
from taguru_refserver.jsonsize import json_size
from taguru_refserver.model import ContextMeta, ContextState
from taguru_refserver.rerank import MODEL, rerank
from taguru_refserver.selection import (
    BudgetLimits,
    array_overhead,
    bigrams,
    dice,
    diversity_order,
    select,
)
from taguru_refserver.state import ServerState

GENEROUS = BudgetLimits(1000, 10_000_000, 10_000_000)


def association(
    subject: str, label: str, obj: str, *, source: str | None = None, paragraph: int = 0
) -> dict[str, Any]:
    attributions = []
    if source is not None:
        attributions.append(
            {
                "count": 1,
                "locator": None,
                "paragraph": paragraph,
                "section": None,
                "source": source,
                "weight": 1.0,
            }
        )
    return {
        "attributions": attributions,
        "count": 1,
        "label": label,
        "object": obj,
        "subject": subject,
        "weight": 1.0,
    }


def hit(source: str, text: str, paragraph: int = 0) -> dict[str, Any]:
    return {
        "lanes": {"bm25": {"rank": 1, "score": F32(1.0)}},
        "paragraph": paragraph,
        "score": F32(1.0),
        "source": source,
        "text": text,
    }


def distinct(i: int, width: int = 12) -> str:
    """A text sharing no bigram with ``distinct(j)`` for any other ``j``."""
    return "".join(chr(0x4E00 + width * i + k) for k in range(width))


def passages(*texts: str) -> list[EvidenceCandidate]:
    return [passage_candidate("ctx", hit(f"s{i}", t), i + 1) for i, t in enumerate(texts)]


def ids(package: dict[str, Any], key: str = "items") -> list[str]:
    return [entry["candidate_id"].split("\0", 1)[1] for entry in package[key]]


# -- fusion ------------------------------------------------------------------------------


def test_fusion_sums_reciprocal_ranks_and_counts_what_it_folded() -> None:
    x = association("a", "r", "b")
    pool = [
        association_candidate(x, "graph_query", 2),
        passage_candidate("ctx", hit("p.md", "text"), 1),
        association_candidate(association("a", "r", "c"), "graph_activate", 2),
        association_candidate(x, "graph_activate", 1),
    ]
    fused, dropped = fuse(pool)
    assert dropped == 1
    assert [g.candidate.canonical_key for g in fused] == ["a\0r\0b", "ctx\0p.md\0" + "0", "a\0r\0c"]
    assert [g.fused_rank for g in fused] == [1, 2, 3]
    assert fused[0].lane_ranks == {"graph_query": 2, "graph_activate": 1}
    assert fused[0].candidate.lane == "graph_activate"  # the best-ranked appearance represents


def test_equal_fused_scores_order_by_kind_then_canonical_key() -> None:
    pool = [
        passage_candidate("ctx", hit("b.md", "x"), 1),
        passage_candidate("ctx", hit("a.md", "y"), 1),
        association_candidate(association("z", "r", "o"), "graph_activate", 1),
    ]
    fused, _ = fuse(pool)
    assert [g.candidate.candidate_id for g in fused] == [
        "association\0z\0r\0o",
        "passage\0ctx\0a.md\0" + "0",
        "passage\0ctx\0b.md\0" + "0",
    ]


def test_a_group_keeps_every_appearance_s_locators() -> None:
    one = association("a", "r", "b", source="s1.md")
    two = association("a", "r", "b", source="s2.md", paragraph=3)
    fused, _ = fuse(
        [
            association_candidate(one, "graph_query", 1),
            association_candidate(two, "graph_activate", 1),
        ]
    )
    assert fused[0].candidate.locators == {("s1.md", 0), ("s2.md", 3)}


# -- near duplicates ---------------------------------------------------------------------


def test_bigram_dice() -> None:
    assert bigrams("Ab") == frozenset({"ab"})
    assert bigrams("x") == frozenset({"xx"})  # a one-character text pairs with itself
    assert dice(frozenset(), frozenset()) == 1.0
    near = dice(bigrams("the quick brown fox jumps"), bigrams("the quick brown fox jump"))
    assert near == pytest.approx(0.9787234)
    assert dice(bigrams("cats are independent"), bigrams("dogs are loyal")) == pytest.approx(
        0.3448276
    )


def test_a_near_duplicate_passage_names_the_kept_one() -> None:
    fused, dropped = fuse(
        passages("the quick brown fox jumps", "cats are independent", "the quick brown fox jump")
    )
    package = select(fused, dropped, GENEROUS, {})
    assert ids(package) == ["ctx\0s0\0" + "0", "ctx\0s1\0" + "0"]
    assert package["omitted"] == [
        {
            "candidate_id": "passage\0ctx\0s2\0" + "0",
            "duplicate_of": "passage\0ctx\0s0\0" + "0",
            "kind": "passage",
            "reason": "duplicate_passage",
        }
    ]
    assert package["omitted_by_reason"] == {"duplicate_passage": 1}


# -- contradiction groups ----------------------------------------------------------------


def cats() -> list[EvidenceCandidate]:
    return [
        association_candidate(association("cats", "is_a", obj), "graph_activate", rank)
        for rank, obj in enumerate(["mammals", "reptiles", "fish"], start=1)
    ]


def test_a_three_way_contradiction_is_one_group_listing_the_others_sorted() -> None:
    fused, dropped = fuse(cats())
    package = select(fused, dropped, GENEROUS, {})
    assert package["selection"]["contradiction_groups"] == 1
    by_object = {item["association"]["object"]: item["contradicts"] for item in package["items"]}
    assert by_object["reptiles"] == [
        "association\0cats\0is_a\0fish",
        "association\0cats\0is_a\0mammals",
    ]
    assert all(len(others) == 2 for others in by_object.values())


def test_a_group_that_does_not_fit_is_omitted_whole_and_the_walk_goes_on() -> None:
    later = association_candidate(association("dogs", "is_a", "mammals"), "graph_activate", 4)
    fused, dropped = fuse([*cats(), later])
    package = select(fused, dropped, BudgetLimits(2, 10_000_000, 10_000_000), {})
    assert ids(package) == ["dogs\0is_a\0mammals"]
    assert [o["reason"] for o in package["omitted"]] == ["contradiction_group_exceeds_budget"] * 3
    assert package["omitted_by_reason"] == {"contradiction_group_exceeds_budget": 3}


# -- diversity tiers ---------------------------------------------------------------------


@pytest.mark.parametrize(("max_items", "width"), [(0, 1), (3, 1), (4, 1), (8, 2), (40, 10)])
def test_tier_width_is_a_quarter_of_max_items_and_at_least_one(max_items: int, width: int) -> None:
    package = select([], 0, BudgetLimits(max_items, 65536, 4000), {})
    assert package["selection"]["diversity_tier_width"] == width


def test_within_a_tier_new_sources_go_first() -> None:
    sources = ["a", "a", "b", None, "b"]
    groups = [
        FusedCandidate(
            EvidenceCandidate("passage", f"k{i}", "passage_bm25", i + 1, {}, source), {}, i + 1
        )
        for i, source in enumerate(sources)
    ]
    units = [[i] for i in range(5)]
    assert diversity_order(units, groups, 5) == [[0], [2], [3], [1], [4]]
    assert diversity_order(units, groups, 2) == [[0], [1], [2], [3], [4]]
    assert diversity_order(units, groups, 1) == [[0], [1], [2], [3], [4]]


# -- greedy admission --------------------------------------------------------------------


def test_an_over_budget_candidate_is_skipped_and_a_smaller_later_one_admitted() -> None:
    fused, dropped = fuse(passages("x" * 500, "tiny"))
    package = select(fused, dropped, BudgetLimits(10, 400, 100_000), {})
    assert ids(package) == ["ctx\0s1\0" + "0"]
    assert [(o["candidate_id"], o["reason"]) for o in package["omitted"]] == [
        ("passage\0ctx\0s0\0" + "0", "budget_exceeded")
    ]
    item = package["items"][0]
    assert package["budget"]["bytes_used"] == array_overhead(1) + item["bytes"] + 2
    unmeasured = {k: v for k, v in item.items() if k not in ("bytes", "estimated_tokens")}
    assert json_size(unmeasured)[0] == item["bytes"]


def test_a_zero_item_budget_omits_everything_and_lists_at_most_twenty() -> None:
    fused, dropped = fuse(passages(*(distinct(i) for i in range(25))))
    package = select(fused, dropped, BudgetLimits(0, 65536, 4000), {})
    assert package["items"] == []
    assert len(package["omitted"]) == 20
    assert package["omitted_total"] == 25
    assert package["omitted_by_reason"] == {"budget_exceeded": 25}
    assert package["budget"] == {
        "bytes_used": 4,
        "items_used": 0,
        "limits": {"max_bytes": 65536, "max_items": 0, "max_tokens": 4000},
        "tokens_used": 1,
    }


def test_omitted_by_reason_keys_are_sorted() -> None:
    fused, dropped = fuse(passages("same words here", "same words here", "other text"))
    package = select(fused, dropped, BudgetLimits(1, 65536, 4000), {})
    assert list(package["omitted_by_reason"]) == ["budget_exceeded", "duplicate_passage"]


def test_a_shared_citation_is_charged_once_and_listed_sorted() -> None:
    cited = {
        ("b.md", 0): {"locator": None, "section": None, "source": "b.md", "text": "B"},
        ("a.md", 2): {"locator": None, "section": None, "source": "a.md", "text": "A"},
    }
    pool = [
        association_candidate(association("x", "r", "y", source="b.md"), "graph_activate", 1),
        association_candidate(association("z", "r", "y", source="b.md"), "graph_activate", 2),
        association_candidate(
            association("w", "r", "y", source="a.md", paragraph=2), "graph_activate", 3
        ),
    ]
    fused, dropped = fuse(pool)
    package = select(fused, dropped, GENEROUS, cited)
    assert [(c["source"], c["paragraph"]) for c in package["citations"]] == [
        ("a.md", 2),
        ("b.md", 0),
    ]
    entries = sum(json_size(entry)[0] for entry in package["citations"])
    items = sum(item["bytes"] for item in package["items"])
    assert (
        package["budget"]["bytes_used"] == array_overhead(3) + items + array_overhead(2) + entries
    )
    assert package["items"][0]["corroboration"] == {
        "attributions": [{"paragraph": 0, "source": "b.md"}],
        "sources": ["b.md"],
    }


# -- the toy reranker -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("configured", "model", "texts", "reason"),
    [
        (False, None, ["a", "b"], "not_configured"),
        (True, "someone-else", ["a", "b"], "model_mismatch"),
        (True, "refserver-toy-rerank-fail:no_such_reason", ["a", "b"], "model_mismatch"),
        (True, None, ["only one"], "empty_pool"),
        (True, "refserver-toy-rerank-fail:provider_error", ["only one"], "empty_pool"),
        (True, "refserver-toy-rerank-fail:provider_error", ["a", "b"], "provider_error"),
        (True, "refserver-toy-rerank-fail:timeout", ["a", "b"], "timeout"),
        (True, "refserver-toy-rerank-fail:circuit_open", ["a", "b"], "circuit_open"),
        (True, "refserver-toy-rerank-fail:invalid_permutation", ["a", "b"], "invalid_permutation"),
    ],
)
def test_rerank_degrades_with_the_reference_reasons(
    configured: bool, model: str | None, texts: list[str], reason: str
) -> None:
    outcome = rerank(configured, model, "q", texts)
    assert outcome.order is None
    assert outcome.plan == {"configured": configured, "ran": False, "reason": reason}


def test_rerank_orders_by_query_terms_held_keeping_ties_in_fused_order() -> None:
    texts = ["nothing here", "brown fox", "quick brown fox", "fox"]
    outcome = rerank(True, MODEL, "quick brown fox", texts)
    assert outcome.order == [2, 1, 3, 0]
    assert outcome.plan == {"configured": True, "model": MODEL, "ran": True}


def test_select_applies_a_reorder_before_grouping_and_tiers() -> None:
    fused, dropped = fuse(passages("first text", "second text", "third text"))
    package = select(fused, dropped, GENEROUS, {}, lambda survivors: [2, 0, 1])
    assert ids(package) == ["ctx\0s2\0" + "0", "ctx\0s0\0" + "0", "ctx\0s1\0" + "0"]
    assert [item["fused_rank"] for item in package["items"]] == [3, 1, 2]
    ignored = select(fused, dropped, GENEROUS, {}, lambda survivors: [0, 0, 1])
    assert [item["fused_rank"] for item in ignored["items"]] == [1, 2, 3]


# -- spreading activation ---------------------------------------------------------------


def graph(*edges: tuple[str, str, str, float]) -> ContextState:
    context = ContextState("g", ContextMeta())
    for subject, label, obj, weight in edges:
        assert_association(context, AssociationInput(subject, label, obj, weight, None, None))
    return context


def test_activation_strength_is_activation_times_decay_times_sum() -> None:
    context = graph(("起点", "強い関係", "A", 3.0), ("起点", "弱い関係", "B", 1.0))
    ranked = activate(context, ["起点"], 0.5, 10)
    assert [(a.edge.object, a.strength) for a in ranked] == [("A", 1.5), ("B", 0.5)]


def test_a_hub_dilutes_what_lies_beyond_it() -> None:
    context = graph(
        ("o", "r", "hub", 1.0),
        ("hub", "r", "x1", 1.0),
        ("hub", "r", "x2", 1.0),
        ("hub", "r", "x3", 1.0),
        ("o", "r", "relay", 1.0),
        ("relay", "r", "far", 1.0),
    )
    strength = {a.edge.object: a.strength for a in activate(context, ["o"], 0.5, 10)}
    assert strength["hub"] == strength["relay"] == 0.5
    # o splits 0.5 over its two edges: 0.25 reaches hub and relay; hub's total is 4.
    assert strength["x1"] == 0.25 * 0.5
    assert strength["far"] == 0.25 * 0.5
    assert activate(context, ["o"], 0.0, 10) == []
    assert len(activate(context, ["o"], 0.5, 2)) == 2


def test_activation_ties_rank_by_creation_order_and_skip_retracted_edges() -> None:
    context = graph(("s", "r", "b", 1.0), ("s", "r", "a", 1.0), ("s", "r", "c", -1.0))
    assert [a.edge.object for a in activate(context, ["s"], 0.5, 10)] == ["b", "a", "c"]
    context.edges[("s", "r", "b")].count = 0
    assert [a.edge.object for a in activate(context, ["s"], 0.5, 10)] == ["a", "c"]
    assert activate(context, ["unknown"], 0.5, 10) == []


# -- the route --------------------------------------------------------------------------------


SAKE = "青嶺酒造は雲居県霧沢町の蔵元である。杜氏は高瀬である。"


async def evidence(server: Any, body: Any, name: str = "sake") -> Any:
    return await server.call("POST", context_path(name, "/evidence"), body)


async def seed(server: Any) -> None:
    await server.create("sake")
    await server.store("sake", {"passages": {"kura.md": SAKE}})
    await server.associate(
        "sake",
        [
            {"subject": "青嶺酒造", "label": "杜氏", "object": "高瀬", "weight": 1.0},
            {"subject": "青嶺酒造", "label": "所在地", "object": "霧沢町", "weight": 2.0},
        ],
    )


async def test_labels_run_the_query_lane_and_fuse_with_activation() -> None:
    async with in_process() as server:
        await seed(server)
        package = await server.ok(
            "POST", context_path("sake", "/evidence"), {"origins": "青嶺酒造", "labels": ["杜氏"]}
        )
    assert package["plan"]["lanes"]["query"] == {"ran": True}
    assert package["plan"]["selection"]["dedup_dropped"] == 1
    first = package["items"][0]
    assert first["association"]["label"] == "杜氏"
    assert first["lane_ranks"] == [
        {"lane": "graph_activate", "rank": 2},
        {"lane": "graph_query", "rank": 1},
    ]
    assert [item["kind"] for item in package["items"]] == ["association", "association", "passage"]


async def test_request_validation_and_budget_clamps() -> None:
    async with in_process() as server:
        await seed(server)
        missing = await evidence(server, {"labels": []})
        null = await evidence(server, {"origins": None})
        negative = await evidence(server, {"origins": [], "budget": {"max_items": -1}})
        labels = await evidence(server, {"origins": [], "labels": ["x"] * 1001})
        clamped = await server.ok(
            "POST",
            context_path("sake", "/evidence"),
            {"origins": [], "budget": {"max_items": 5000, "max_bytes": 10**9, "max_tokens": 10**9}},
        )
        zero = await server.ok(
            "POST",
            context_path("sake", "/evidence"),
            {"origins": ["青嶺酒造"], "budget": {"max_bytes": 0}},
        )
    assert (missing.status_code, missing.json()["code"]) == (422, "malformed_request")
    assert missing.json()["error"].endswith("missing field `origins`")
    assert null.status_code == 422
    assert negative.status_code == 422
    assert labels.status_code == 400
    assert labels.json()["error"] == (
        "labels carries 1001 items, past the per-request limit of 1000; split the request"
    )
    assert clamped["budget"]["limits"] == {
        "max_bytes": 1048576,
        "max_items": 1000,
        "max_tokens": 10**9,
    }
    assert zero["items"] == [] and zero["omitted_total"] == 3


async def test_search_limit_is_capped_at_200() -> None:
    async with in_process() as server:
        await server.create("many")
        await server.store(
            "many", {"passages": {f"p{i:03}.md": f"共通語。{distinct(i, 20)}" for i in range(230)}}
        )
        package = await server.ok(
            "POST",
            context_path("many", "/evidence"),
            {
                "origins": [],
                "text_fallback_query": "共通語",
                "search_limit": 1000,
                "budget": {"max_items": 1000, "max_bytes": 1048576, "max_tokens": 10**9},
            },
        )
    assert len(package["items"]) == 200
    assert package["omitted_total"] == 0


async def test_passage_lane_reasons_and_one_read_per_lane() -> None:
    """Each lane that reads the context counts as taguru counts it (measured on 0.9.7):
    one read per origin resolved, the query and activate lanes when they run, and
    the passage search, each empty when it found nothing."""
    async with in_process() as server:
        await seed(server)
        before = (await server.entry("sake"))["usage"]
        package = await server.ok(
            "POST",
            context_path("sake", "/evidence"),
            {"origins": ["誰も知らない"], "text_fallback_query": "。。"},
        )
        after = (await server.entry("sake"))["usage"]
        await server.ok(
            "POST",
            context_path("sake", "/evidence"),
            {"origins": ["青嶺酒造", "誰も知らない", "高瀬"], "labels": ["杜氏"]},
        )
        lanes = (await server.entry("sake"))["usage"]
    assert package["plan"]["lanes"]["passages"] == {
        "ran": False,
        "reason": "the query yields no searchable terms",
    }
    assert package["plan"]["lanes"]["activate"]["reason"] == "no anchors resolved from 'origins'"
    assert package["items"] == []
    # an origin that resolves to nothing, then a passage search with no terms
    assert (after["reads"], after["empty_reads"]) == (before["reads"] + 2, 2)
    # three origins (one resolves to nothing), query, activate, passages
    assert (lanes["reads"], lanes["empty_reads"]) == (after["reads"] + 6, 3)


async def test_a_configured_toy_reranker_reports_its_plan() -> None:
    async with in_process(state=ServerState(reranker=True)) as server:
        await seed(server)
        plain = await server.ok(
            "POST", context_path("sake", "/evidence"), {"origins": ["青嶺酒造"]}
        )
        asked = await server.ok(
            "POST",
            context_path("sake", "/evidence"),
            {"origins": ["青嶺酒造"], "rerank": {"model": MODEL}, "text_fallback_query": "霧沢町"},
        )
        mismatch = await server.ok(
            "POST",
            context_path("sake", "/evidence"),
            {"origins": ["青嶺酒造"], "rerank": {"model": "cohere-rerank"}},
        )
        single = await server.ok(
            "POST",
            context_path("sake", "/evidence"),
            {"origins": [], "text_fallback_query": "高瀬", "rerank": {}},
        )
    assert plain["plan"]["reranker"] == {"configured": True, "ran": False}
    assert asked["plan"]["reranker"] == {"configured": True, "model": MODEL, "ran": True}
    # The passage and 所在地 name 霧沢町; 杜氏 does not, so it drops to last.
    assert asked["items"][-1]["association"]["label"] == "杜氏"
    assert mismatch["plan"]["reranker"]["reason"] == "model_mismatch"
    assert single["plan"]["reranker"] == {"configured": True, "ran": False, "reason": "empty_pool"}


async def test_communities_degrade_for_a_key_granted_the_artifact_context() -> None:
    from taguru_refserver.auth import ApiKey

    grant = ("sake", "sake::communities")
    async with in_process(keys=[ApiKey("r", "rtok", "read", contexts=grant)]) as server:
        server.state.create_context("sake", None)
        response = await server.call(
            "POST",
            context_path("sake", "/evidence"),
            {"origins": [], "include_communities": True},
            token="rtok",
        )
    assert response.status_code == 200
    reason = response.json()["result"]["plan"]["lanes"]["communities"]["reason"]
    assert reason.startswith("no communities artifact for 'sake'")

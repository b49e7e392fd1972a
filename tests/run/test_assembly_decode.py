"""The evidence lane's request and decoders (EVALUATE.md §7.2, §7.4; HTTP.md §6.9).

Every recorded evidence package (contract/wire/evidence_*.json) and the
reconstructed assembly example go through the client's decoder; the request
body is the one taguru sends; a package evaluate cannot use gets the spec's
message (never an exception of another kind, whatever the server sends).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.paths import EXAMPLES, WIRE
from support.run import evidence_package, passage_item

from taguru_eval.artifact.blocks import evidence_block as artifact_evidence_block
from taguru_eval.inputs.dataset import CaseOptions, EvalCase
from taguru_eval.options import Budget, resolve_budget
from taguru_eval.run.lanes.evidence import (
    NO_PACKAGE,
    Assembly,
    PackageError,
    decode_package,
    evidence_block,
    evidence_body,
    evidence_rows,
    hits_from_items,
    usage,
)

DEFAULTS = resolve_budget(None, None, None)


def fixture(path: Path) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return doc


def recorded_limits(package: dict[str, Any]) -> Budget:
    limits = package["budget"]["limits"]
    return Budget(limits["max_items"], limits["max_bytes"], limits["max_tokens"])


PACKAGES = [*sorted(WIRE.glob("evidence_*.json")), EXAMPLES / "evidence_evaluate_assembly.json"]

# Scoring hits of each recorded package at limit 10: own locator, then citation_refs.
EXPECTED_HITS = {
    "evidence_budget_constrained": [],
    "evidence_communities_degrade_and_rerank_reason": [],
    "evidence_contradiction_group": [("s1.md", 0), ("s2.md", 0)],
    "evidence_duplicate_passage": [("a.md", 0)],
    "evidence_mixed_lanes": [("docs/kura.md", 0), ("docs/kura.md", 0)],
    "evidence_evaluate_assembly": [("corpus/brewery.md", 0), ("corpus/brewery.md", 0)],
}


def test_every_recorded_package_has_an_expectation() -> None:
    assert sorted(path.stem for path in PACKAGES) == sorted(EXPECTED_HITS)


@pytest.mark.parametrize("path", PACKAGES, ids=lambda path: path.stem)
def test_every_recorded_package_decodes(path: Path) -> None:
    raw = fixture(path)["response"]["result"]
    package = decode_package(raw, recorded_limits(raw))
    hits = hits_from_items(package.items, 10)
    assert [(hit["source"], hit["paragraph"]) for hit in hits] == EXPECTED_HITS[path.stem]
    assert all(hit["score"] == 0.0 and hit["lanes"] == {} for hit in hits)
    assert usage(package) == {**raw["budget"], "omitted_total": raw["omitted_total"]}
    assert package.omitted_by_reason == raw["omitted_by_reason"]

    block = artifact_evidence_block(evidence_block(package, 12))
    assert block["selection"] == raw["plan"]["selection"]
    assert block["reranker"] == raw["plan"]["reranker"]
    assert list(block) == [
        "outcome",
        "latency_ms",
        "items",
        *(["omitted_by_reason"] if raw["omitted_by_reason"] else []),
        "selection",
        "reranker",
    ]
    assert [item["candidate_id"] for item in block["items"]] == [
        item["candidate_id"] for item in raw["items"]
    ]
    text = json.dumps(block, ensure_ascii=False)
    for item in raw["items"]:  # no payload, no text, no lane ranks in the artifact
        for payload in ("passage", "association", "community"):
            if payload in item and "text" in item[payload]:
                assert item[payload]["text"] not in text
    assert "lane_ranks" not in text and "estimated_tokens" not in text

    rows = evidence_rows(package)
    assert [row["admitted"] for row in rows] == [True] * len(raw["items"]) + [False] * len(
        raw["omitted"]
    )
    assert [row["lane_ranks"] for row in rows[: len(raw["items"])]] == [
        item["lane_ranks"] for item in raw["items"]
    ]
    assert [row["omitted_reason"] for row in rows[len(raw["items"]) :]] == [
        omitted["reason"] for omitted in raw["omitted"]
    ]


def test_the_duplicate_passage_package_in_detail() -> None:
    raw = fixture(WIRE / "evidence_duplicate_passage.json")["response"]["result"]
    package = decode_package(raw, DEFAULTS)
    block = artifact_evidence_block(evidence_block(package, 5))
    assert block == {
        "outcome": "assembled",
        "latency_ms": 5,
        "items": [
            {
                "candidate_id": "passage\u0000dup-corpus\u0000a.md\u00000",
                "kind": "passage",
                "fused_rank": 1,
                "source": "a.md",
                "paragraph": 0,
                "citation_refs": [],
            }
        ],
        "omitted_by_reason": {"duplicate_passage": 1},
        "selection": {"dedup_dropped": 0, "contradiction_groups": 0, "diversity_tier_width": 10},
        "reranker": {"configured": False, "ran": False},
    }
    omitted = evidence_rows(package)[1]
    assert omitted["duplicate_of"] == "passage\u0000dup-corpus\u0000a.md\u00000"
    assert omitted["omitted_reason"] == "duplicate_passage" and omitted["fused_rank"] is None


def test_the_rerank_reason_is_kept_in_the_spec_order() -> None:
    raw = fixture(WIRE / "evidence_communities_degrade_and_rerank_reason.json")
    package = decode_package(raw["response"]["result"], DEFAULTS)
    block = artifact_evidence_block(evidence_block(package, 1))
    assert list(block["reranker"].items()) == [
        ("configured", False),
        ("ran", False),
        ("reason", "not_configured"),
    ]


# --------------------------------------------------------------------------- the request


def case(**fields: Any) -> EvalCase:
    base: dict[str, Any] = {"case_id": "c", "query": "青嶺", "line": 2}
    base.update(fields)
    return EvalCase(**base)


def test_the_request_is_the_example_taguru_sends() -> None:
    example = fixture(EXAMPLES / "evidence_evaluate_assembly.json")["request"]
    body = evidence_body(case(cues=("青嶺",), options=CaseOptions(limit=10)), Assembly(DEFAULTS))
    assert body == example
    # serde_json's json! objects keep their keys sorted, nested ones too.
    assert list(body) == sorted(body)
    budget = body["budget"]
    assert isinstance(budget, dict) and list(budget) == sorted(budget)


def test_origins_fall_back_to_the_query_and_rerank_is_sent_only_when_given() -> None:
    plain = evidence_body(case(query="q?", options=CaseOptions(floor=0.5)), Assembly(DEFAULTS))
    assert plain["origins"] == ["q?"] and plain["text_fallback_query"] == "q?"
    assert plain["search_limit"] == 10 and plain["semantic_floor"] == 0.5
    assert "rerank" not in plain
    assert "tags" not in plain and "since" not in plain and "until" not in plain
    ranked = evidence_body(case(cues=("a", "b")), Assembly(Budget(3, 4096, 200), "m-1"))
    assert ranked["origins"] == ["a", "b"]
    assert ranked["rerank"] == {"model": "m-1"}
    assert ranked["budget"] == {"max_bytes": 4096, "max_items": 3, "max_tokens": 200}
    assert list(ranked) == sorted(ranked)


# --------------------------------------------------------------------------- scoring hits


def item(index: int, text: str = "body") -> dict[str, Any]:
    """Passage ``p.md#index`` at fused rank ``index + 1``."""
    return passage_item("p.md", index, index + 1, context="ctx", text=text)


def package(items: list[dict[str, Any]], **changes: Any) -> dict[str, Any]:
    return evidence_package(items) | changes


def test_five_passage_items_at_limit_three_give_the_first_three() -> None:
    decoded = decode_package(package([item(i) for i in range(5)]), DEFAULTS)
    hits = hits_from_items(decoded.items, 3)
    assert [hit["paragraph"] for hit in hits] == [0, 1, 2]


def test_no_locator_or_item_carries_the_text() -> None:
    secret = "CANARY-body-text-4711"
    community = {
        "candidate_id": "community\u0000ctx\u0000community:7\u00002",
        "kind": "community",
        "fused_rank": 2,
        "lane_ranks": [{"lane": "community", "rank": 1}],
        "citation_refs": [],
        "bytes": 1,
        "estimated_tokens": 1,
        "community": {"community": "7", "paragraph": 2, "score": 0.25, "text": secret},
    }
    decoded = decode_package(package([item(0, text=secret), community]), DEFAULTS)
    hits = hits_from_items(decoded.items, 10)
    assert [(hit["source"], hit["paragraph"]) for hit in hits] == [
        ("p.md", 0),
        ("community:7", 2),
    ]
    for value in (hits, evidence_block(decoded, 1), evidence_rows(decoded)):
        assert secret not in json.dumps(value)


def test_an_unknown_kind_is_kept_and_contributes_only_its_citations() -> None:
    unknown = {
        "candidate_id": "table\u0000ctx\u0000t1",
        "kind": "table",
        "fused_rank": 1,
        "lane_ranks": [{"lane": "tables", "rank": 1}],
        "citation_refs": [{"source": "t.md", "paragraph": 4}],
        "bytes": 10,
        "estimated_tokens": 3,
        "table": {"rows": 3},
    }
    decoded = decode_package(package([unknown, item(1)]), DEFAULTS)
    hits = hits_from_items(decoded.items, 10)
    assert [(hit["source"], hit["paragraph"]) for hit in hits] == [("t.md", 4), ("p.md", 1)]
    listed = artifact_evidence_block(evidence_block(decoded, 1))["items"][0]
    assert listed == {
        "candidate_id": "table\u0000ctx\u0000t1",
        "kind": "table",
        "fused_rank": 1,
        "citation_refs": [{"source": "t.md", "paragraph": 4}],
    }


# --------------------------------------------------------------------------- refused packages


def refused(payload: object, budget: Budget = DEFAULTS) -> str:
    with pytest.raises(PackageError) as info:
        decode_package(payload, budget)
    return NO_PACKAGE.format(detail=info.value.detail)


def test_wrong_shapes_name_the_field() -> None:
    assert refused([]) == (
        "response carries no recognizable evidence package (expected `object`, got `array`)"
    )
    no_items = package([])
    del no_items["items"]
    assert refused(no_items) == (
        "response carries no recognizable evidence package (object missing required field `items`)"
    )
    bad_kind = item(0)
    bad_kind["kind"] = 3
    assert refused(package([bad_kind])) == (
        "response carries no recognizable evidence package "
        "(items[0].kind: expected `str`, got `int`)"
    )
    no_reranker = package([])
    del no_reranker["plan"]["reranker"]
    assert refused(no_reranker).endswith("(plan: object missing required field `reranker`)")
    bad_lane = package([])
    bad_lane["plan"]["lanes"]["citations"] = {"ran": "yes"}
    assert refused(bad_lane).endswith("(plan.lanes.citations.ran: expected `bool`, got `str`)")
    bad_text = item(0)
    del bad_text["passage"]["text"]
    assert refused(package([bad_text])).endswith(
        "(items[0].passage: object missing required field `text`)"
    )
    # taguru's passage payload is its PassageHit, whose `lanes` has no serde default.
    no_lanes = item(0)
    del no_lanes["passage"]["lanes"]
    assert refused(package([no_lanes])).endswith(
        "(items[0].passage: object missing required field `lanes`)"
    )
    three_point_o = item(0)
    three_point_o["fused_rank"] = 3.0
    assert refused(package([three_point_o])).endswith(
        "(items[0].fused_rank: expected `int`, got `float`)"
    )
    boolean = item(0)
    boolean["passage"]["paragraph"] = True
    assert refused(package([boolean])).endswith(
        "(items[0].passage.paragraph: expected `int`, got `bool`)"
    )
    too_far = item(0)
    too_far["passage"]["paragraph"] = 2**32
    assert refused(package([too_far])).endswith(
        "(items[0].passage.paragraph: expected `int` <= 4294967295)"
    )
    assert refused(package([], omitted_total=-1)).endswith("(omitted_total: expected `int` >= 0)")


def test_a_budget_the_server_did_not_honor() -> None:
    asked = Budget(1, 4096, 200)
    other_limits = package([item(0)])
    assert refused(other_limits, asked) == (
        "response carries no recognizable evidence package (budget.limits: not the "
        "requested budget (max_items 1, max_bytes 4096, max_tokens 200))"
    )
    over = package([item(0), item(1)])
    over["budget"]["limits"] = asked.to_json()
    assert refused(over, asked) == (
        "response carries no recognizable evidence package "
        "(budget.items_used: 2 exceeds budget.limits.max_items 1)"
    )
    heavy = package([item(0)])
    heavy["budget"]["limits"] = asked.to_json()
    heavy["budget"]["tokens_used"] = 201
    assert refused(heavy, asked).endswith(
        "(budget.tokens_used: 201 exceeds budget.limits.max_tokens 200)"
    )
    miscounted = package([item(0)])
    miscounted["budget"]["items_used"] = 0
    assert refused(miscounted).endswith("(budget.items_used: 0 but items holds 1)")


def test_an_empty_package_reports_its_fixed_overhead_even_over_a_tiny_limit() -> None:
    # HTTP.md §8.1: no item admitted still costs the two empty arrays (4 bytes,
    # 1 token), so a server asked for max_bytes 1 honestly reports 4.
    tiny = Budget(40, 1, 0)
    empty = package([])
    empty["budget"] = {
        "items_used": 0,
        "bytes_used": 4,
        "tokens_used": 1,
        "limits": tiny.to_json(),
    }
    decoded = decode_package(empty, tiny)
    assert decoded.items == []
    one = package([item(0)])
    one["budget"]["limits"] = tiny.to_json()
    assert "exceeds budget.limits.max_bytes 1" in refused(one, tiny)


JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 2**65) | st.floats(allow_nan=False) | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(JSON)
def test_any_json_is_a_package_or_a_package_error(payload: object) -> None:
    try:
        decode_package(payload, DEFAULTS)
    except PackageError as exc:
        assert exc.detail


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [prefix] if prefix else []
    if isinstance(value, dict):
        for key, item in value.items():
            found += _paths(item, (*prefix, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += _paths(item, (*prefix, index))
    return found


MIXED = fixture(WIRE / "evidence_mixed_lanes.json")["response"]["result"]


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(_paths(MIXED)), JSON, st.booleans())
def test_a_damaged_recorded_package_is_a_package_or_a_package_error(
    path: tuple[Any, ...], replacement: object, delete: bool
) -> None:
    damaged = copy.deepcopy(MIXED)
    parent = damaged
    for key in path[:-1]:
        parent = parent[key]
    if delete:
        del parent[path[-1]]
    else:
        parent[path[-1]] = replacement
    try:
        decoded = decode_package(damaged, DEFAULTS)
    except PackageError as exc:
        assert exc.detail
    else:
        hits_from_items(decoded.items, 10)
        evidence_rows(decoded)
        artifact_evidence_block(evidence_block(decoded, 0))


# --------------------------------------------------------------------------- taguru's edges
# Each variant differs from a conforming package in exactly one field and is
# accepted or refused as taguru's serde decoding of an EvidencePackage does.

U64_MAX = 2**64 - 1


def _community() -> dict[str, Any]:
    return {
        "candidate_id": "community\u0000ctx\u0000community:7\u00002",
        "kind": "community",
        "fused_rank": 1,
        "lane_ranks": [{"lane": "community", "rank": 1}],
        "citation_refs": [],
        "bytes": 1,
        "estimated_tokens": 1,
        "community": {
            "community": "7",
            "paragraph": 2,
            "score": 0.25,
            "text": "t",
            "members": [{"name": "a", "strength": 0.5}],
        },
    }


def _conforming(which: str) -> dict[str, Any]:
    if which == "mixed":
        return copy.deepcopy(MIXED)
    if which == "community":
        return package([_community()])
    return package([item(0)])


def _set(doc: dict[str, Any], path: tuple[Any, ...], value: object) -> None:
    parent: Any = doc
    for key in path[:-1]:
        parent = parent[key]
    if value is _DELETE:
        del parent[path[-1]]
    else:
        parent[path[-1]] = value


_DELETE = object()

ACCEPTED = [
    ("no bytes", "passage", ("items", 0, "bytes"), _DELETE),
    ("no estimated_tokens", "passage", ("items", 0, "estimated_tokens"), _DELETE),
    ("null bytes", "passage", ("items", 0, "bytes"), None),
    ("no members", "community", ("items", 0, "community", "members"), _DELETE),
    (
        "empty members",
        "community",
        ("items", 0, "community", "members"),
        [],
    ),
    ("null locator", "mixed", ("citations", 0, "citation", "locator"), None),
    ("no locator", "mixed", ("citations", 0, "citation", "locator"), _DELETE),
    ("omitted_total 2^63", "passage", ("omitted_total",), 2**63),
    ("omitted_total u64 max", "passage", ("omitted_total",), U64_MAX),
    ("fused_rank u64 max", "passage", ("items", 0, "fused_rank"), U64_MAX),
    ("lane rank u64 max", "passage", ("items", 0, "lane_ranks", 0, "rank"), U64_MAX),
    ("bytes u64 max", "passage", ("items", 0, "bytes"), U64_MAX),
    ("hit lane rank u64 max", "passage", ("items", 0, "passage", "lanes", "bm25", "rank"), U64_MAX),
    ("reason count u64 max", "passage", ("omitted_by_reason",), {"budget_exceeded": U64_MAX}),
    ("dedup_dropped u64 max", "passage", ("plan", "selection", "dedup_dropped"), U64_MAX),
    ("association count u64 max", "mixed", ("items", 0, "association", "count"), U64_MAX),
]

REFUSED = [
    (
        "no passage lanes",
        "passage",
        ("items", 0, "passage", "lanes"),
        _DELETE,
        "items[0].passage: object missing required field `lanes`",
    ),
    (
        "locator extra key",
        "mixed",
        ("citations", 0, "citation", "locator", "page"),
        3,
        "citations[0].citation.locator: object contains unknown field `page`",
    ),
    (
        "null members",
        "community",
        ("items", 0, "community", "members"),
        None,
        "items[0].community.members: expected `array`, got `null`",
    ),
    (
        "omitted_total 2^64",
        "passage",
        ("omitted_total",),
        U64_MAX + 1,
        f"omitted_total: expected `int` <= {U64_MAX}",
    ),
    (
        "fused_rank 2^64",
        "passage",
        ("items", 0, "fused_rank"),
        U64_MAX + 1,
        f"items[0].fused_rank: expected `int` <= {U64_MAX}",
    ),
    (
        "reason count 2^64",
        "passage",
        ("omitted_by_reason",),
        {"budget_exceeded": U64_MAX + 1},
        f"omitted_by_reason.budget_exceeded: expected `int` <= {U64_MAX}",
    ),
    (
        "association count 2^64",
        "mixed",
        ("items", 0, "association", "count"),
        U64_MAX + 1,
        f"items[0].association.count: expected `int` <= {U64_MAX}",
    ),
    (
        "negative fused_rank",
        "passage",
        ("items", 0, "fused_rank"),
        -1,
        "items[0].fused_rank: expected `int` >= 0",
    ),
    (
        "negative reason count",
        "passage",
        ("omitted_by_reason",),
        {"budget_exceeded": -1},
        "omitted_by_reason[...]: expected `int` >= 0",
    ),
]


def test_every_base_package_conforms() -> None:
    for which in ("passage", "community", "mixed"):
        decode_package(_conforming(which), DEFAULTS)


@pytest.mark.parametrize(
    ("which", "path", "value"), [row[1:] for row in ACCEPTED], ids=[row[0] for row in ACCEPTED]
)
def test_taguru_accepts(which: str, path: tuple[Any, ...], value: object) -> None:
    doc = _conforming(which)
    _set(doc, path, value)
    decoded = decode_package(doc, DEFAULTS)
    # Nothing downstream trips over an absent measure or a count past int64.
    hits_from_items(decoded.items, 10)
    evidence_rows(decoded)
    usage(decoded)
    artifact_evidence_block(evidence_block(decoded, 0))


@pytest.mark.parametrize(
    ("which", "path", "value", "detail"),
    [row[1:] for row in REFUSED],
    ids=[row[0] for row in REFUSED],
)
def test_taguru_refuses(which: str, path: tuple[Any, ...], value: object, detail: str) -> None:
    doc = _conforming(which)
    _set(doc, path, value)
    assert refused(doc) == NO_PACKAGE.format(detail=detail)


def test_a_count_past_int64_is_kept_exact_in_the_case_blocks() -> None:
    doc = package([item(0)], omitted_total=U64_MAX)
    doc["items"][0]["fused_rank"] = U64_MAX
    decoded = decode_package(doc, DEFAULTS)
    assert usage(decoded)["omitted_total"] == U64_MAX
    assert evidence_block(decoded, 0)["items"][0]["fused_rank"] == U64_MAX

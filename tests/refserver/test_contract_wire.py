"""Replay every recorded fixture of contract/wire/ against the reference server.

Each fixture's seed corpus (wire/README.md) is rebuilt over HTTP, the recorded
request is sent, and the response must equal the recorded body once the
volatile fields of wire/shapes.json are blanked (and, for the one recorded
body-decoding refusal, serde's parser position; see ``without_position``).
Nothing is skipped: any fixture file this test does not know about fails it.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
import pytest
from support.paths import WIRE
from support.refserver import (
    BASIC_ASSOCIATIONS,
    Server,
    blank,
    context_path,
    in_process,
    load_fixture,
    route_path,
    seed_basic,
)

from taguru_refserver.auth import ApiKey

SHAPES = load_fixture(WIRE / "shapes.json")
VOLATILE = tuple(SHAPES["volatile_fields"])
CODES = set(SHAPES["enums"]["response.code"])

Scenario = Callable[[Server, dict[str, Any]], Awaitable[httpx.Response]]


async def _replay(server: Server, fixture: dict[str, Any], name: str) -> httpx.Response:
    return await server.call(
        fixture["method"], route_path(fixture["route"], name), fixture["request"]
    )


async def health(server: Server, fixture: dict[str, Any]) -> httpx.Response:
    return await _replay(server, fixture, "")


async def contexts_list(server: Server, fixture: dict[str, Any]) -> httpx.Response:
    await seed_basic(server)
    return await _replay(server, fixture, "")


async def embeddings_status(server: Server, fixture: dict[str, Any]) -> httpx.Response:
    await server.create("corpus-b")
    await server.associate("corpus-b", [{"subject": "a", "label": "r", "object": "b", "weight": 1}])
    return await _replay(server, fixture, "corpus-b")


async def sources_search(server: Server, fixture: dict[str, Any]) -> httpx.Response:
    await server.create("corpus-c")
    await server.store("corpus-c", {"passages": {"doc.md": "青嶺酒造は雲居県霧沢町の蔵元である。"}})
    return await _replay(server, fixture, "corpus-c")


async def empty_context(name: str, server: Server, fixture: dict[str, Any]) -> httpx.Response:
    await server.create(name)
    return await _replay(server, fixture, name)


async def store_passages(server: Server, fixture: dict[str, Any]) -> httpx.Response:
    return await empty_context("corpus-e", server, fixture)


async def associations_store(server: Server, fixture: dict[str, Any]) -> httpx.Response:
    return await empty_context("corpus-l", server, fixture)


async def labels(server: Server, fixture: dict[str, Any]) -> httpx.Response:
    await server.create("corpus-labels")
    await server.associate(
        "corpus-labels",
        [{"subject": "alpha", "label": "connects_to", "object": "beta", "weight": 1}],
    )
    return await _replay(server, fixture, "corpus-labels")


async def _aliases_corpus(server: Server) -> str:
    await server.create("corpus-aliases")
    await server.associate(
        "corpus-aliases",
        [{"subject": "PostgreSQL 16", "label": "採用", "object": "DB", "weight": 1}],
    )
    return "corpus-aliases"


async def aliases_register(server: Server, fixture: dict[str, Any]) -> httpx.Response:
    return await _replay(server, fixture, await _aliases_corpus(server))


async def aliases_list(server: Server, fixture: dict[str, Any]) -> httpx.Response:
    name = await _aliases_corpus(server)
    await server.ok("POST", context_path(name, "/aliases"), load_aliases_request())
    return await _replay(server, fixture, name)


async def aliases_remove(server: Server, fixture: dict[str, Any]) -> httpx.Response:
    name = await _aliases_corpus(server)
    await server.ok("POST", context_path(name, "/aliases"), load_aliases_request())
    await server.ok("GET", context_path(name, "/aliases"))
    return await _replay(server, fixture, name)


def load_aliases_request() -> Any:
    return load_fixture(WIRE / "aliases_register.json")["request"]


async def recall_as_query(server: Server, fixture: dict[str, Any]) -> httpx.Response:
    """recall.json pins the MatchPage that /query returns too (wire/README.md).

    This server has no /recall; the same population queried for the recalled
    cue's subject must produce the recorded page byte for byte.
    """
    await server.create("corpus-a", {"description": "wire-contract corpus"})
    await server.associate("corpus-a", [dict(BASIC_ASSOCIATIONS[0])])
    await server.store(
        "corpus-a",
        {
            "passages": {"doc.md": "alpha connects to beta."},
            "locators": {"doc.md": [{"paragraph": 0, "locator": {"kind": "page", "value": "1"}}]},
        },
    )
    return await server.call("POST", context_path("corpus-a", "/query"), {"subject": "alpha"})


async def no_context(server: Server, fixture: dict[str, Any]) -> httpx.Response:
    return await _replay(server, fixture, "does-not-exist")


async def over_limit(server: Server, fixture: dict[str, Any]) -> httpx.Response:
    return await empty_context("corpus-o", server, fixture)


async def add_associations_warn(server: Server, fixture: dict[str, Any]) -> httpx.Response:
    await server.create("corpus-g")
    await server.ok("PUT", context_path("corpus-g", "/schema"), WARN_SCHEMA)
    return await _replay(server, fixture, "corpus-g")


# The smallest schema under which the fixture's batch raises its one violation:
# 杜氏 wants a Brewery subject, and the batch itself types 高瀬 as a Person.
WARN_SCHEMA = {
    "schema": 1,
    "mode": "warn",
    "closed_labels": False,
    "types": {"Brewery": {}, "Person": {}},
    "relations": {"杜氏": {"domain": ["Brewery"], "range": ["Person"]}},
}


# -- evidence seeds (wire/README.md) -------------------------------------------------


async def evidence_mixed_lanes(server: Server, fixture: dict[str, Any]) -> httpx.Response:
    await server.create("sake")
    await server.store(
        "sake",
        {
            "passages": {"docs/kura.md": "青嶺酒造は雲居県霧沢町の蔵元である。杜氏は高瀬である。"},
            "locators": {
                "docs/kura.md": [{"paragraph": 0, "locator": {"kind": "page", "value": "1"}}]
            },
        },
    )
    await server.associate("sake", [_sourced("青嶺酒造", "杜氏", "高瀬", "docs/kura.md")])
    return await _replay(server, fixture, "sake")


async def evidence_budget_constrained(server: Server, fixture: dict[str, Any]) -> httpx.Response:
    await server.create("budget-corpus")
    items = [
        {"subject": f"s{i}", "label": "rel", "object": f"o{i}", "weight": 1.0} for i in range(5)
    ]
    await server.associate("budget-corpus", items)
    return await _replay(server, fixture, "budget-corpus")


async def evidence_duplicate_passage(server: Server, fixture: dict[str, Any]) -> httpx.Response:
    await server.create("dup-corpus")
    text = "the quick brown fox jumps over the lazy dog"
    await server.store("dup-corpus", {"passages": {"a.md": text, "b.md": text + "s"}})
    return await _replay(server, fixture, "dup-corpus")


async def evidence_contradiction_group(server: Server, fixture: dict[str, Any]) -> httpx.Response:
    await server.create("contra-corpus")
    await server.store(
        "contra-corpus",
        {
            "passages": {
                "s1.md": "猫は哺乳類である。",
                "s2.md": "猫は爬虫類だと主張する文献もある。",
            },
            "locators": {"s1.md": [{"paragraph": 0, "locator": {"kind": "page", "value": "1"}}]},
        },
    )
    await server.associate(
        "contra-corpus",
        [_sourced("猫", "is_a", "哺乳類", "s1.md"), _sourced("猫", "is_a", "爬虫類", "s2.md")],
    )
    return await _replay(server, fixture, "contra-corpus")


async def evidence_communities(server: Server, fixture: dict[str, Any]) -> httpx.Response:
    await server.create("comm-corpus")
    await server.associate(
        "comm-corpus", [{"subject": "alpha", "label": "rel", "object": "beta", "weight": 1.0}]
    )
    return await _replay(server, fixture, "comm-corpus")


def _sourced(subject: str, label: str, obj: str, source: str) -> dict[str, Any]:
    return {
        "subject": subject,
        "label": label,
        "object": obj,
        "weight": 1.0,
        "source": source,
        "paragraph": 0,
    }


# Fixtures replayed for full equality.
EXACT: dict[str, Scenario] = {
    "health": health,
    "version": health,
    "contexts_list": contexts_list,
    "embeddings_status": embeddings_status,
    "sources_search": sources_search,
    "store_passages": store_passages,
    "associations_store": associations_store,
    "labels": labels,
    "aliases_register": aliases_register,
    "aliases_list": aliases_list,
    "aliases_remove": aliases_remove,
    "recall": recall_as_query,
    "error_no_context": no_context,
    "error_over_limit": over_limit,
    "add_associations_warn": add_associations_warn,
    "evidence_mixed_lanes": evidence_mixed_lanes,
    "evidence_budget_constrained": evidence_budget_constrained,
    "evidence_duplicate_passage": evidence_duplicate_passage,
    "evidence_contradiction_group": evidence_contradiction_group,
    "evidence_communities_degrade_and_rerank_reason": evidence_communities,
}

# Fields that are this implementation's own accounting (HTTP.md §11.12): equal type, any value.
ACCOUNTING_FIELDS = ("footprint_bytes",)


def fixture_params() -> list[Any]:
    return [
        pytest.param(path, id=path.stem)
        for path in sorted(WIRE.glob("*.json"))
        if path.name != "shapes.json"
    ]


def strip_accounting(value: Any) -> Any:
    if isinstance(value, dict):
        return {
            k: (type(v).__name__ if k in ACCOUNTING_FIELDS else strip_accounting(v))
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [strip_accounting(v) for v in value]
    return value


@pytest.mark.parametrize("path", fixture_params())
async def test_wire_fixture(path: Any) -> None:
    fixture = load_fixture(path)
    operation = fixture["operation"]
    if operation in SPECIAL:
        response = await SPECIAL[operation](fixture)
    else:
        assert operation in EXACT, f"fixture {path.name} is not covered by this test"
        async with in_process() as server:
            response = await EXACT[operation](server, fixture)
    assert response.status_code == fixture["status"], response.text
    assert response.headers["content-type"].startswith("application/json")
    actual = strip_accounting(blank(response.json(), VOLATILE))
    assert actual == strip_accounting(without_position(fixture["response"]))


# serde ends a body-decoding error with where its parser stood in the request
# text upstream sent; this server reports the same error without a position
# (every 422 it writes does), so that suffix alone is dropped from the record.
_POSITION = re.compile(r" at line \d+ column \d+$")


def without_position(body: dict[str, Any]) -> dict[str, Any]:
    if body.get("code") != "malformed_request":
        return body
    return {**body, "error": _POSITION.sub("", body["error"])}


async def malformed_budget(fixture: dict[str, Any]) -> httpx.Response:
    """error_malformed_request.json: ``budget`` a string where an object is due → 422."""
    async with in_process() as server:
        await server.create("corpus-m")
        return await _replay(server, fixture, "corpus-m")


async def forbidden_scope(fixture: dict[str, Any]) -> httpx.Response:
    """error_forbidden.json: the upstream keys (``boss:atok,reader:rtok``) and scopes."""
    keys = [
        ApiKey("boss", "atok", "admin"),
        ApiKey("reader", "rtok", "read", contexts=("forbidden-corpus",)),
    ]
    async with in_process(keys=keys) as server:
        await server.create("forbidden-corpus", token="atok")
        return await server.call(
            fixture["method"],
            route_path(fixture["route"], "forbidden-corpus"),
            fixture["request"],
            token="rtok",
        )


SPECIAL: dict[str, Callable[[dict[str, Any]], Awaitable[httpx.Response]]] = {
    "error_malformed_request": malformed_budget,
    "error_forbidden": forbidden_scope,
}


def test_the_position_suffix_is_the_only_part_dropped() -> None:
    recorded = load_fixture(WIRE / "error_malformed_request.json")["response"]["error"]
    assert recorded.endswith(" at line 1 column 25")
    assert without_position({"code": "malformed_request", "error": recorded})["error"] == (
        recorded.removesuffix(" at line 1 column 25")
    )


async def test_a_scoped_key_is_refused_on_a_context_outside_its_grant() -> None:
    keys = [ApiKey("reader", "rtok", "read", contexts=("granted",))]
    async with in_process(token="atok", keys=keys) as server:
        await server.create("other", token="atok")
        response = await server.call(
            "POST", context_path("other", "/evidence"), {"origins": []}, token="rtok"
        )
        granted = await server.call(
            "POST", context_path("granted", "/evidence"), {"origins": []}, token="rtok"
        )
    assert response.status_code == 403
    assert response.json()["error"] == "key 'reader' has no grant on context 'other'"
    assert granted.status_code == 404  # granted, and then simply not there


def test_every_wire_fixture_is_classified() -> None:
    known = set(EXACT) | set(SPECIAL)
    for path in WIRE.glob("*.json"):
        if path.name == "shapes.json":
            continue
        assert load_fixture(path)["operation"] in known, path.name


async def test_contexts_list_revision_is_the_recorded_one() -> None:
    """create + 1 association + 1 single-source store = {graph 1, passages 1, config 0}."""
    async with in_process() as server:
        await seed_basic(server)
        entry = await server.entry("corpus-a")
    assert entry["revision"] == {"config": 0, "graph": 1, "passages": 1}
    assert entry["usage"]["reads"] == 1
    assert entry["usage"]["writes"] == 2

"""Replay every recorded fixture of contract/wire/ against the reference server.

Each fixture's seed corpus (wire/README.md) is rebuilt over HTTP, the recorded
request is sent, and the response must equal the recorded body once the
volatile fields of wire/shapes.json are blanked. Fixtures whose population
cannot be rebuilt here are checked for the same key set, types and enum
values; fixtures of routes this server does not serve yet are skipped with the
reason, and any fixture file this test does not know about fails it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import httpx
import pytest
from conftest import WIRE
from refserver_support import (
    Server,
    blank,
    context_path,
    in_process,
    load_fixture,
    route_path,
    seed_basic,
)

from taguru_eval.refserver.auth import ApiKey

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
    await server.associate("corpus-a", [dict(BASIC_ITEM)])
    await server.store(
        "corpus-a",
        {
            "passages": {"doc.md": "alpha connects to beta."},
            "locators": {"doc.md": [{"paragraph": 0, "locator": {"kind": "page", "value": "1"}}]},
        },
    )
    return await server.call("POST", context_path("corpus-a", "/query"), {"subject": "alpha"})


BASIC_ITEM = {
    "subject": "alpha",
    "label": "connects_to",
    "object": "beta",
    "weight": 2.0,
    "source": "doc.md",
    "paragraph": 0,
}


async def no_context_on_resolve(server: Server, fixture: dict[str, Any]) -> httpx.Response:
    """error_no_context.json was recorded on /evidence; the 404 is route-independent."""
    return await server.call("POST", context_path("does-not-exist", "/resolve"), {"cue": "x"})


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
    "error_no_context": no_context_on_resolve,
}

# Fields that are this implementation's own accounting (HTTP.md §11.12): equal type, any value.
ACCOUNTING_FIELDS = ("footprint_bytes",)

# Routes this server does not serve yet (evidence assembly is a later issue) or
# populations it cannot build (a schema in warn mode): the reason is reported.
NOT_SERVED = {
    "evidence_budget_constrained": "POST /contexts/{name}/evidence is not served yet",
    "evidence_communities_degrade_and_rerank_reason": "POST …/evidence is not served yet",
    "evidence_contradiction_group": "POST …/evidence is not served yet",
    "evidence_duplicate_passage": "POST …/evidence is not served yet",
    "evidence_mixed_lanes": "POST …/evidence is not served yet",
    "add_associations_warn": "needs a schema in warn mode; this server models no schemas",
}


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
    if operation in NOT_SERVED:
        pytest.skip(NOT_SERVED[operation])
    if operation in SHAPE_ONLY:
        await SHAPE_ONLY[operation](fixture)
        return
    assert operation in EXACT, f"fixture {path.name} is not covered by this test"
    async with in_process() as server:
        response = await EXACT[operation](server, fixture)
    assert response.status_code == fixture["status"], response.text
    assert response.headers["content-type"].startswith("application/json")
    actual = strip_accounting(blank(response.json(), VOLATILE))
    assert actual == strip_accounting(fixture["response"])


# -- shape-only checks ---------------------------------------------------------------


def assert_same_shape(expected: Any, actual: Any, path: str = "$") -> None:
    """Same key sets and JSON types, recursively (lists compared element-wise by shape)."""
    assert _kind(expected) == _kind(actual), f"{path}: {_kind(actual)} != {_kind(expected)}"
    if isinstance(expected, dict):
        assert set(actual) == set(expected), f"{path}: keys {sorted(actual)} != {sorted(expected)}"
        for key in expected:
            assert_same_shape(expected[key], actual[key], f"{path}.{key}")
    elif isinstance(expected, list) and expected and actual:
        for index, item in enumerate(actual):
            assert_same_shape(expected[0], item, f"{path}[{index}]")


def _kind(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "number"
    return type(value).__name__


async def over_limit_on_query(fixture: dict[str, Any]) -> None:
    """error_over_limit.json (1001 evidence origins) → the same refusal for 1001 query subjects."""
    async with in_process() as server:
        await server.create("corpus-o")
        count = len(fixture["request"]["origins"])
        response = await server.call(
            "POST", context_path("corpus-o", "/query"), {"subject": ["x"] * count}
        )
    body = response.json()
    assert response.status_code == fixture["status"] == 400
    assert_same_shape(fixture["response"], body)
    expected = dict(fixture["response"])
    expected["error"] = expected["error"].replace("origins", "subject")
    assert blank(body, VOLATILE) == expected


async def malformed_on_search(fixture: dict[str, Any]) -> None:
    """error_malformed_request.json (a string where /evidence wants an object) → 422 on search."""
    async with in_process() as server:
        await server.create("corpus-m")
        response = await server.call(
            "POST",
            context_path("corpus-m", "/sources/search"),
            {"query": "x", "tags": "not-a-list"},
        )
    body = response.json()
    assert response.status_code == fixture["status"] == 422
    assert_same_shape(fixture["response"], body)
    assert body["code"] == fixture["response"]["code"] in CODES
    prefix = "Failed to deserialize the JSON body into the target type: "
    assert fixture["response"]["error"].startswith(prefix)
    assert body["error"] == prefix + 'tags: invalid type: string "not-a-list", expected a sequence'


async def forbidden_for_read_key(fixture: dict[str, Any]) -> None:
    """error_forbidden.json needs context-scoped keys; a role refusal has the same shape."""
    async with in_process(keys=[ApiKey("reader", "rtok", "read")], token="atok") as server:
        await server.create("forbidden-corpus", token="atok")
        response = await server.call(
            "POST",
            context_path("forbidden-corpus", "/sources"),
            {"passages": {}},
            token="rtok",
        )
    body = response.json()
    assert response.status_code == fixture["status"] == 403
    assert_same_shape(fixture["response"], body)
    assert body["code"] == fixture["response"]["code"] in CODES


SHAPE_ONLY: dict[str, Callable[[dict[str, Any]], Awaitable[None]]] = {
    "error_over_limit": over_limit_on_query,
    "error_malformed_request": malformed_on_search,
    "error_forbidden": forbidden_for_read_key,
}


def test_every_wire_fixture_is_classified() -> None:
    known = set(EXACT) | set(SHAPE_ONLY) | set(NOT_SERVED)
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

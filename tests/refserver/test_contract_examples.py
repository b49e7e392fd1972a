"""Replay the reconstructed examples of contract/examples/ against the reference server.

examples/README.md marks each file's provenance; every example of a route this
server serves is replayed on its named seed corpus and compared in full after
blanking the volatile fields (plus ``stored_at``, which the README calls an
illustrative epoch: the server stamps wall-clock time, so only its type is
checked).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import httpx
import pytest
from support.paths import EXAMPLES, WIRE
from support.refserver import (
    Server,
    blank,
    context_path,
    in_process,
    load_fixture,
    route_path,
    seed_ambiguity,
    seed_basic,
    seed_offline,
    seed_smoke,
)

from taguru_refserver.auth import ApiKey

VOLATILE = tuple(load_fixture(WIRE / "shapes.json")["volatile_fields"])
ILLUSTRATIVE = ("stored_at", "footprint_bytes")

Seed = Callable[[Server], Awaitable[str]]


async def smoke(server: Server) -> str:
    await seed_smoke(server)
    return "sake"


async def offline(server: Server) -> str:
    await seed_offline(server)
    return "sake"


async def ambiguity(server: Server) -> str:
    await seed_ambiguity(server)
    return "sake"


async def basic(server: Server) -> str:
    await seed_basic(server)
    return "corpus-a"


async def aomine(server: Server) -> str:
    await server.create("sake")
    text = (
        "青嶺酒造は雲居県霧沢町の蔵元である。\n\n"
        "原料米には山田錦を使い、精米歩合は50パーセントまで磨く。"
    )
    await server.store("sake", {"passages": {"docs/aomine.md": text}})
    return "sake"


async def sections(server: Server) -> str:
    await server.create("sake")
    await server.store(
        "sake",
        {
            "passages": {"doc-sections": "蔵の杜氏は高瀬。\n\n創業は1907年。"},
            "sections": {"doc-sections": [{"paragraph": 1, "section": "沿革"}]},
        },
    )
    return "sake"


async def errcodes(server: Server) -> str:
    await server.create("sake")
    await server.store("sake", {"passages": {"doc": "本文。"}})
    return "sake"


async def nothing(server: Server) -> str:
    return "sake"


async def existing(server: Server) -> str:
    await server.create("sake", {"description": "d"})
    return "sake"


async def missing(server: Server) -> str:
    return "does-not-exist"


SEEDS: dict[str, Seed] = {
    "resolve": ambiguity,
    "resolve_containment": smoke,
    "resolve_empty_cue": smoke,
    "resolve_label": smoke,
    "query": smoke,
    "query_unpinned": smoke,
    "citations": aomine,
    "citations_section": sections,
    "citations_no_source": errcodes,
    "citations_no_paragraph": errcodes,
    "context_create": nothing,
    "context_create_exists": existing,
    "context_get": basic,
    "context_get_missing": missing,
    "sources_list": smoke,
    "sources_list_end": smoke,
    "sources_search_evaluate": smoke,
    "sources_search_filtered": offline,
    "sources_search_zero_limit": aomine,
    "evidence_evaluate_assembly": smoke,
}
AUTH = {"error_unauthorized", "error_forbidden_role"}


def example_params() -> list[Any]:
    return [pytest.param(path, id=path.stem) for path in sorted(EXAMPLES.glob("*.json"))]


def comparable(value: Any) -> Any:
    """Volatile fields blanked; illustrative ones reduced to their JSON type."""
    value = blank(value, VOLATILE)
    return _types_for(value, ILLUSTRATIVE)


def _types_for(value: Any, keys: tuple[str, ...]) -> Any:
    if isinstance(value, dict):
        return {
            k: (type(v).__name__ if k in keys else _types_for(v, keys)) for k, v in value.items()
        }
    if isinstance(value, list):
        return [_types_for(v, keys) for v in value]
    return value


async def replay_auth(fixture: dict[str, Any]) -> httpx.Response:
    keys = [ApiKey("ci", "ci-token", "read")]
    async with in_process(token="admin-token", keys=keys) as server:
        if fixture["operation"] == "error_unauthorized":
            response = await server.call(fixture["method"], fixture["route"], fixture["request"])
            assert response.headers["www-authenticate"] == "Bearer"
            return response
        return await server.call(
            fixture["method"],
            route_path(fixture["route"], "sake"),
            fixture["request"],
            token="ci-token",
        )


@pytest.mark.parametrize("path", example_params())
async def test_example(path: Any) -> None:
    fixture = load_fixture(path)
    operation = fixture["operation"]
    if operation in AUTH:
        response = await replay_auth(fixture)
    else:
        assert operation in SEEDS, f"example {path.name} is not covered by this test"
        async with in_process() as server:
            name = await SEEDS[operation](server)
            response = await server.call(
                fixture["method"], route_path(fixture["route"], name), fixture["request"]
            )
    assert response.status_code == fixture["status"], response.text
    assert comparable(response.json()) == comparable(fixture["response"])


async def test_smoke_case_end_to_end_answers() -> None:
    """HTTP.md §10.1/§10.2 outcomes beyond the single examples."""
    async with in_process() as server:
        await seed_offline(server)
        search = await server.ok(
            "POST", context_path("sake", "/sources/search"), {"query": "青嶺", "limit": 10}
        )
        sources = [hit["source"] for hit in search["hits"]]
        assert sources[0] == "corpus/brewery.md"
        assert "corpus/ledger.md" not in sources
        assert "corpus/unrelated.md" not in sources
        cited = await server.ok(
            "POST", context_path("sake", "/citations"), {"source": "corpus/brewery.md", "index": 0}
        )
        assert cited["section"] == "由来"
        resolved = await server.ok(
            "POST", context_path("sake", "/resolve"), {"cue": "青嶺酒造", "limit": 5}
        )
        assert [c["name"] for c in resolved] == ["青嶺酒造"]
        assert resolved[0]["kind"] == "exact"

"""Each write moves exactly the revision counters of HTTP.md §7.6 (and usage of §6.3).

Every case starts from the same seeded context, sends one request, and checks
the whole ``revision`` object and ``usage.writes`` delta — so a write that
moved a counter it should not have fails as surely as one that missed.
"""

from __future__ import annotations

from typing import Any

import pytest
from support.refserver import Server, context_path, in_process

NAME = "rev"
SEED_PASSAGES = {
    "passages": {
        "a.md": "青嶺酒造は蔵元である。\n\n杜氏は高瀬。",
        "b.md": "仕込み水は霧沢の湧き水。",
    }
}
SEED_ASSOCIATIONS = [
    {
        "subject": "青嶺酒造",
        "label": "杜氏",
        "object": "高瀬",
        "weight": 1.0,
        "source": "a.md",
        "paragraph": 1,
    },
    {"subject": "青嶺酒造", "label": "所在地", "object": "霧沢町", "weight": 1.0},
]
SEED_ALIASES = {"concepts": {"青嶺": "青嶺酒造"}}


async def seed(server: Server) -> None:
    await server.create(NAME, {"description": "revisions"})
    await server.store(NAME, SEED_PASSAGES)
    await server.associate(NAME, SEED_ASSOCIATIONS)
    await server.ok("POST", context_path(NAME, "/aliases"), SEED_ALIASES)


ASSOCIATION = {"subject": "高瀬", "label": "出身", "object": "南部", "weight": 0.5}

# (id, method, path after /contexts/{name}, body, status, graph, passages, config, writes)
CASES: list[tuple[str, str, str, Any, int, int, int, int, int]] = [
    (
        "store-2-sources",
        "POST",
        "/sources",
        {"passages": {"c.md": "新しい段落。", "d.md": "もう一つ。"}},
        200,
        0,
        2,
        0,
        1,
    ),
    (
        "store-restore-counts",
        "POST",
        "/sources",
        {"passages": {"a.md": "差し替え。"}},
        200,
        0,
        1,
        0,
        1,
    ),
    ("store-empty-map", "POST", "/sources", {"passages": {}}, 200, 0, 0, 0, 1),
    ("store-refused", "POST", "/sources", {"passages": {"": "空の名前。"}}, 400, 0, 0, 0, 0),
    ("associations-3", "POST", "/associations", [ASSOCIATION] * 3, 200, 3, 0, 0, 1),
    ("associations-empty", "POST", "/associations", [], 200, 0, 0, 0, 0),
    (
        "associations-refused",
        "POST",
        "/associations",
        [ASSOCIATION, {**ASSOCIATION, "weight": 2e6}],
        400,
        0,
        0,
        0,
        0,
    ),
    (
        "aliases-2",
        "POST",
        "/aliases",
        {"concepts": {"青嶺蔵": "青嶺酒造"}, "labels": {"とうじ": "杜氏"}},
        200,
        2,
        0,
        0,
        1,
    ),
    ("aliases-reregister-counts", "POST", "/aliases", SEED_ALIASES, 200, 1, 0, 0, 1),
    (
        "aliases-partial-conflict",
        "POST",
        "/aliases",
        {"concepts": {"あ": "青嶺酒造", "青嶺": "高瀬"}},
        409,
        1,
        0,
        0,
        1,
    ),
    (
        "aliases-unknown-canonical",
        "POST",
        "/aliases",
        {"concepts": {"x": "存在しない"}},
        409,
        0,
        0,
        0,
        0,
    ),
    ("aliases-remove", "DELETE", "/aliases", {"concepts": ["青嶺"]}, 200, 1, 0, 0, 1),
    ("aliases-remove-canonical", "DELETE", "/aliases", {"concepts": ["青嶺酒造"]}, 409, 0, 0, 0, 0),
    ("retract-graph-and-passage", "POST", "/sources/retract", {"source": "a.md"}, 200, 1, 1, 0, 1),
    ("retract-passage-only", "POST", "/sources/retract", {"source": "b.md"}, 200, 0, 1, 0, 1),
    ("retract-unknown", "POST", "/sources/retract", {"source": "zzz.md"}, 200, 0, 0, 0, 1),
    (
        "retract-dry-run",
        "POST",
        "/sources/retract?dry_run=true",
        {"source": "a.md"},
        200,
        0,
        0,
        0,
        0,
    ),
    (
        "retract-association",
        "POST",
        "/associations/retract",
        {"subject": "青嶺酒造", "label": "所在地", "object": "霧沢町"},
        200,
        1,
        0,
        0,
        1,
    ),
    (
        "retract-association-missing",
        "POST",
        "/associations/retract",
        {"subject": "青嶺酒造", "label": "所在地", "object": "どこか"},
        200,
        0,
        0,
        0,
        0,
    ),
    ("patch-changes", "PATCH", "", {"description": "changed", "dice_floor": 0.5}, 200, 0, 0, 1, 1),
    ("patch-same", "PATCH", "", {"description": "revisions"}, 200, 0, 0, 0, 0),
    ("search-read", "POST", "/sources/search", {"query": "青嶺"}, 200, 0, 0, 0, 0),
    ("resolve-read", "POST", "/resolve", {"cue": "青嶺", "limit": 5}, 200, 0, 0, 0, 0),
    ("resolve-label-read", "POST", "/resolve_label", {"cue": "杜氏"}, 200, 0, 0, 0, 0),
    ("query-read", "POST", "/query", {"subject": "青嶺"}, 200, 0, 0, 0, 0),
    ("citation-read", "POST", "/citations", {"source": "a.md", "paragraph": 0}, 200, 0, 0, 0, 0),
    ("entry-read", "GET", "", None, 200, 0, 0, 0, 0),
]


@pytest.mark.parametrize(
    ("method", "suffix", "body", "status", "graph", "passages", "config", "writes"),
    [pytest.param(*case[1:], id=case[0]) for case in CASES],
)
async def test_write_moves_exactly_its_counters(
    method: str,
    suffix: str,
    body: Any,
    status: int,
    graph: int,
    passages: int,
    config: int,
    writes: int,
) -> None:
    async with in_process() as server:
        await seed(server)
        before = await server.entry(NAME)
        response = await server.call(method, context_path(NAME, suffix), body)
        assert response.status_code == status, response.text
        after = await server.entry(NAME)
    delta = {key: after["revision"][key] - before["revision"][key] for key in before["revision"]}
    assert delta == {"graph": graph, "passages": passages, "config": config}
    assert after["usage"]["writes"] - before["usage"]["writes"] == writes


async def test_a_fresh_context_starts_at_zero_and_seeding_counts_every_item() -> None:
    async with in_process() as server:
        await server.create(NAME)
        assert (await server.entry(NAME))["revision"] == {"graph": 0, "passages": 0, "config": 0}
        await seed_rest(server)
        entry = await server.entry(NAME)
    # 2 sources stored; 2 associations + 1 alias applied.
    assert entry["revision"] == {"graph": 3, "passages": 2, "config": 0}
    assert entry["usage"]["writes"] == 3


async def seed_rest(server: Server) -> None:
    await server.store(NAME, SEED_PASSAGES)
    await server.associate(NAME, SEED_ASSOCIATIONS)
    await server.ok("POST", context_path(NAME, "/aliases"), SEED_ALIASES)


async def test_reads_move_usage_but_not_revision() -> None:
    async with in_process() as server:
        await seed(server)
        before = await server.entry(NAME)
        await server.ok("POST", context_path(NAME, "/sources/search"), {"query": "存在しない語"})
        await server.call(
            "POST", context_path(NAME, "/citations"), {"source": "nope", "paragraph": 0}
        )
        await server.ok("POST", context_path(NAME, "/resolve"), {"cue": "高瀬"})
        after = await server.entry(NAME)
    assert after["revision"] == before["revision"]
    assert after["usage"]["reads"] - before["usage"]["reads"] == 3
    # the search found nothing and the citation was refused: two empty reads
    assert after["usage"]["empty_reads"] - before["usage"]["empty_reads"] == 2


async def test_retracted_source_disappears_from_reads() -> None:
    async with in_process() as server:
        await seed(server)
        result = await server.ok("POST", context_path(NAME, "/sources/retract"), {"source": "a.md"})
        assert result == {"associations_touched": 1, "passage_removed": True}
        page = await server.ok(
            "POST", context_path(NAME, "/query"), {"subject": "青嶺酒造", "label": "杜氏"}
        )
        listing = await server.ok("GET", context_path(NAME, "/sources"))
        entry = await server.entry(NAME)
    assert page["total"] == 0
    assert listing["sources"] == ["b.md"]
    assert entry["stats"]["dead_edges"] == 1

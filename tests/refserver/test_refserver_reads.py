"""Read-route behaviour beyond the fixtures: paging, ordering, markers, floors, filters."""

from __future__ import annotations

from typing import Any

from support.refserver import Server, context_path, in_process

NAME = "reads"


async def fresh(server: Server) -> None:
    await server.create(NAME)


async def test_sources_walk_pages_like_evaluate() -> None:
    async with in_process() as server:
        await fresh(server)
        await server.store(NAME, {"passages": {"b.md": "b", "a.md": "a", "c/x.md": "x"}})
        first = await server.ok("GET", context_path(NAME, "/sources?limit=2"))
        assert first["sources"] == ["a.md", "b.md"] and first["total"] == 3
        second = await server.ok("GET", context_path(NAME, "/sources?limit=2&after=b.md"))
        assert second["sources"] == ["c/x.md"] and second["total"] == 3
        end = await server.ok("GET", context_path(NAME, "/sources?limit=1000&after=c%2Fx.md"))
        assert end == {"entries": [], "sources": [], "total": 3}
        prefixed = await server.ok("GET", context_path(NAME, "/sources?prefix=c%2F"))
        assert prefixed["sources"] == ["c/x.md"] and prefixed["total"] == 1
        clamped = await server.ok("GET", context_path(NAME, "/sources?limit=0"))
        assert clamped["sources"] == ["a.md"]


async def test_alias_listing_pages_across_namespaces() -> None:
    async with in_process() as server:
        await fresh(server)
        await server.associate(NAME, [{"subject": "A", "label": "L", "object": "B", "weight": 1}])
        await server.ok(
            "POST",
            context_path(NAME, "/aliases"),
            {"concepts": {"a2": "A", "a1": "A"}, "labels": {"l1": "L"}},
        )
        page = await server.ok("GET", context_path(NAME, "/aliases?limit=2"))
        assert page == {"concepts": {"a1": "A", "a2": "A"}, "labels": {}, "total": 3}
        rest = await server.ok("GET", context_path(NAME, "/aliases?after=concept%3Aa2"))
        assert rest == {"concepts": {}, "labels": {"l1": "L"}, "total": 3}
        bad = await server.call("GET", context_path(NAME, "/aliases?after=nonsense"))
        assert bad.status_code == 400 and bad.json()["code"] == "invalid_argument"
        labels = await server.ok("GET", context_path(NAME, "/labels"))
        assert labels == {"labels": ["L"], "total": 1}


WEIGHTED = [
    {"subject": "蔵", "label": "造る", "object": "酒", "weight": 0.5},
    {"subject": "蔵", "label": "使う", "object": "水", "weight": -2.0},
    {"subject": "蔵", "label": "持つ", "object": "井戸", "weight": 1.0},
    {"subject": "蔵", "label": "持つ", "object": "井戸", "weight": 2.0},
    {"subject": "杜氏", "label": "働く", "object": "蔵", "weight": 3.0},
]


async def test_query_orders_by_absolute_weight_and_pages_with_a_cursor() -> None:
    async with in_process() as server:
        await fresh(server)
        await server.associate(NAME, WEIGHTED)
        page = await server.ok("POST", context_path(NAME, "/query"), {"subject": "蔵"})
        triples = [(m["label"], m["object"], m["weight"], m["count"]) for m in page["matches"]]
        assert triples == [
            ("使う", "水", -2.0, 1),
            ("持つ", "井戸", 1.5, 2),
            ("造る", "酒", 0.5, 1),
        ]
        first = await server.ok("POST", context_path(NAME, "/query"), {"subject": "蔵", "limit": 1})
        cursor = {k: first["matches"][0][k] for k in ("weight", "subject", "label", "object")}
        after = await server.ok(
            "POST", context_path(NAME, "/query"), {"subject": "蔵", "limit": 1, "after": cursor}
        )
        assert after["total"] == first["total"] == 3
        assert after["matches"][0]["label"] == "持つ"
        unknown = await server.ok("POST", context_path(NAME, "/query"), {"subject": "誰"})
        assert unknown == {"matches": [], "plan": {"contexts": [NAME]}, "total": 0}
        both = await server.ok("POST", context_path(NAME, "/query"), {"object": ["酒", "水"]})
        assert both["total"] == 2


async def test_gloss_sentences_follow_weight_and_subject_rules() -> None:
    async with in_process() as server:
        await fresh(server)
        await server.associate(NAME, WEIGHTED)
        resolved = await server.ok("POST", context_path(NAME, "/resolve"), {"cue": "蔵"})
        # heaviest |sum| first (3.0, 3.0 tie in insertion order, -2.0, 0.5); the concept's own
        # subject and a repeated subject are left out; a negative sum reads "ではない".
        assert (
            resolved[0]["gloss"] == "蔵。持つは井戸。杜氏の働くは蔵。使うは水ではない。造るは酒。"
        )
        label = await server.ok("POST", context_path(NAME, "/resolve_label"), {"cue": "持つ"})
        assert label[0]["gloss"] == "持つ。蔵の持つは井戸。"


async def test_context_and_request_dice_floors() -> None:
    async with in_process() as server:
        await fresh(server)
        await server.associate(
            NAME, [{"subject": "青嶺酒造", "label": "r", "object": "x", "weight": 1}]
        )
        fuzzy = await server.ok("POST", context_path(NAME, "/resolve"), {"cue": "青嶺酒蔵"})
        assert [c["kind"] for c in fuzzy] == ["fuzzy"]
        meta = await server.ok("PATCH", context_path(NAME), {"dice_floor": 0.9})
        assert meta == {
            "description": "",
            "pinned": False,
            "dice_floor": 0.9,
            "semantic_floor": None,
        }
        assert await server.ok("POST", context_path(NAME, "/resolve"), {"cue": "青嶺酒蔵"}) == []
        override = await server.ok(
            "POST", context_path(NAME, "/resolve"), {"cue": "青嶺酒蔵", "dice_floor": 0.1}
        )
        assert [c["name"] for c in override] == ["青嶺酒造"]
        assert (
            await server.ok("POST", context_path(NAME, "/resolve"), {"cue": "x", "limit": 0}) == []
        )


async def search(server: Server, body: dict[str, Any]) -> dict[str, Any]:
    result: dict[str, Any] = await server.ok("POST", context_path(NAME, "/sources/search"), body)
    return result


async def test_search_time_window_uses_date_then_stored_at() -> None:
    async with in_process() as server:
        await fresh(server)
        await server.store(
            NAME,
            {
                "passages": {"old.md": "酒蔵の話。", "new.md": "酒蔵の話。"},
                "dates": {"old.md": 100},
            },
        )
        stamp = server.state.contexts[NAME].passages["new.md"].stored_at
        old = await search(server, {"query": "酒蔵", "since": 0, "until": 101})
        assert [h["source"] for h in old["hits"]] == ["old.md"]
        assert old["plan"]["contexts"][0]["filter"] == {"eligible_sources": 1, "total_sources": 2}
        new = await search(server, {"query": "酒蔵", "since": stamp})
        assert [h["source"] for h in new["hits"]] == ["new.md"]


async def test_search_plan_reasons_and_filter_block() -> None:
    async with in_process() as server:
        await fresh(server)
        await server.store(NAME, {"passages": {"a.md": "酒蔵。"}, "tags": {"a.md": ["t"]}})
        zero = await search(server, {"query": "酒蔵", "limit": 0, "tags": ["t"]})
        plan = zero["plan"]["contexts"][0]
        assert zero["hits"] == []
        assert plan["lanes"]["bm25"] == {"ran": False, "reason": "the requested limit is 0"}
        assert plan["filter"] == {"eligible_sources": 1, "total_sources": 1}
        blank = await search(server, {"query": "。。"})
        reason = "the query yields no searchable terms"
        assert blank["plan"]["contexts"][0]["lanes"]["vector"] == {"ran": False, "reason": reason}
        assert "filter" not in blank["plan"]["contexts"][0]
        untagged = await search(server, {"query": "酒蔵", "tags": ["other"]})
        assert untagged["hits"] == []


async def test_markers_locators_and_attribution_paragraphs() -> None:
    async with in_process() as server:
        await fresh(server)
        stored = await server.store(
            NAME,
            {
                "passages": {"d.md": "序。\n\n# 本編\n\n一。\n\n二。"},
                "sections": {
                    "d.md": [
                        {"paragraph": 1, "section": "仮"},
                        {"paragraph": 1, "section": "本編"},
                        {"paragraph": 9, "section": "無"},
                    ]
                },
                "locators": {"d.md": [{"paragraph": 2, "locator": {"kind": "page", "value": "3"}}]},
            },
        )
        assert (stored["sections_stored"], stored["sections_dropped"]) == (1, 2)
        assert (stored["locators_stored"], stored["locators_dropped"]) == (1, 0)
        cite = await server.ok(
            "POST", context_path(NAME, "/citations"), {"source": "d.md", "paragraph": 3}
        )
        assert (cite["section"], cite["locator"], cite["text"]) == ("本編", None, "二。")
        before = await server.ok(
            "POST", context_path(NAME, "/citations"), {"source": "d.md", "paragraph": 0}
        )
        assert before["section"] is None
        await server.associate(
            NAME,
            [
                {
                    "subject": "s",
                    "label": "l",
                    "object": "o",
                    "weight": 1,
                    "source": "d.md",
                    "paragraph": 2,
                },
                {
                    "subject": "s",
                    "label": "l",
                    "object": "o2",
                    "weight": 1,
                    "source": "d.md",
                    "paragraph": 99,
                },
                {
                    "subject": "s",
                    "label": "l",
                    "object": "o3",
                    "weight": 1,
                    "source": "later.md",
                    "paragraph": 5,
                },
            ],
        )
        page = await server.ok("POST", context_path(NAME, "/query"), {"subject": "s"})
        shares = {m["object"]: m["attributions"][0] for m in page["matches"]}
        assert shares["o"]["section"] == "本編"
        assert shares["o"]["locator"] == {"kind": "page", "value": "3"}
        assert shares["o2"]["paragraph"] is None  # out of range for the stored passage
        assert shares["o3"]["paragraph"] == 5  # the passage is not stored yet: kept
        assert shares["o3"]["section"] is None


async def test_embeddings_live_and_protocol() -> None:
    async with in_process() as server:
        await fresh(server)
        assert await server.ok("GET", context_path(NAME, "/embeddings")) == {"provider_model": None}
        live = await server.call("GET", "/live")
        assert (live.status_code, live.text) == (200, "ok")
        protocol = await server.call("GET", "/protocol")
        assert "POST /contexts/{name}/sources/search" in protocol.text
        head = await server.call("HEAD", "/health")
        assert (head.status_code, head.content) == (200, b"")

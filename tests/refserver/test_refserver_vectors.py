"""The opt-in toy vector lane: vectors, floor, fusion, embeddings status, switches."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from support.refserver import context_path, in_process

from taguru_eval.cli.serve import parse_args
from taguru_eval.errors import InputError
from taguru_refserver.bm25 import f32
from taguru_refserver.corpus import load_corpus_dir
from taguru_refserver.state import ServerState
from taguru_refserver.vectors import MODEL, PassageVectors, embed

WATER = "仕込み水は霧沢の伏流水である。霧沢の伏流水は軟水で、柔らかな酒になる。"
RAINY = "梅雨明けの空に入道雲が広がった。"
NO_PROVIDER = {"ran": False, "reason": "no embedding provider is configured"}


def cosine(a: str, b: str) -> float:
    va, vb = embed(a), embed(b)
    return f32(sum(w * vb.get(k, 0.0) for k, w in va.items()))


def test_vectors_are_deterministic_unit_length_and_empty_without_terms() -> None:
    vector = embed(WATER)
    assert vector == embed(WATER)
    assert math.fsum(w * w for w in vector.values()) == pytest.approx(1.0)
    assert embed("。。") == {}
    assert cosine(WATER, WATER) == pytest.approx(1.0)


def test_a_paraphrase_clears_the_default_floor_and_unrelated_questions_do_not() -> None:
    assert cosine("霧沢の伏流水の硬度", WATER) == pytest.approx(0.49161446)
    assert cosine("What is the capital of France?", WATER) == 0.0
    assert cosine("新幹線の切符の買い方", WATER) < 0.1


def test_the_index_floors_ranks_and_forgets_a_source() -> None:
    index = PassageVectors()
    index.put_source("w.md", [WATER, RAINY], {1: ["霧沢の伏流水とは"]})
    hits = index.search("霧沢の伏流水の硬度", 50, f32(0.35))
    assert [(h.source, h.paragraph) for h in hits] == [("w.md", 0), ("w.md", 1)]
    assert index.search("霧沢の伏流水の硬度", 1, f32(0.35))[0].paragraph == 0
    # Nothing shared: both cosines are exactly 0.0, which a zero floor admits.
    unrelated = index.search("What is the capital of France?", 50, 0.0)
    assert [(h.paragraph, h.score) for h in unrelated] == [(0, 0.0), (1, 0.0)]
    assert index.search("What is the capital of France?", 50, f32(0.01)) == []
    assert index.rows == 2
    index.remove_source("w.md")
    assert (index.rows, index.search("霧沢の伏流水", 50, 0.0)) == (0, [])


async def search(server: object, query: str, **extra: object) -> dict[str, object]:
    body = {"query": query, **extra}
    result: dict[str, object] = await server.ok(  # type: ignore[attr-defined]
        "POST", context_path("v", "/sources/search"), body
    )
    return result


async def test_hits_carry_lanes_vector_only_above_the_floor() -> None:
    async with in_process(state=ServerState(vector_lane=True)) as server:
        await server.create("v")
        await server.store("v", {"passages": {"a.md": WATER, "b.md": "霧沢町の地図。" + RAINY}})
        page = await search(server, "霧沢の伏流水の硬度")
    plan = page["plan"]["contexts"][0]["lanes"]  # type: ignore[index]
    assert plan == {"bm25": {"ran": True}, "vector": {"ran": True, "floor": 0.35}}
    hits = page["hits"]
    assert [(h["source"], sorted(h["lanes"])) for h in hits] == [  # type: ignore[union-attr]
        ("a.md", ["bm25", "vector"]),
        ("b.md", ["bm25"]),
    ]
    top, lexical_only = hits  # type: ignore[misc]
    assert top["lanes"]["vector"] == {"rank": 1, "score": pytest.approx(0.49161446)}
    assert f32(top["score"]) == f32(f32(1 / 61) + f32(1 / 61))
    # On the RRF scale although only BM25 ranked it (the vector lane ran).
    assert f32(lexical_only["score"]) == f32(1 / 62)


async def test_the_floor_comes_from_the_request_then_the_context() -> None:
    async with in_process(state=ServerState(vector_lane=True)) as server:
        await server.create("v", {"semantic_floor": 0.9})
        await server.store("v", {"passages": {"a.md": WATER, "b.md": RAINY}})
        context_floor = await search(server, "霧沢の伏流水の硬度")
        open_floor = await search(server, "霧沢の伏流水の硬度", semantic_floor=0.0)
    lanes = context_floor["plan"]["contexts"][0]["lanes"]  # type: ignore[index]
    assert lanes["vector"] == {"ran": True, "floor": 0.9}
    assert all("vector" not in h["lanes"] for h in context_floor["hits"])  # type: ignore[union-attr]
    rainy = [h for h in open_floor["hits"] if h["source"] == "b.md"]  # type: ignore[union-attr]
    assert rainy[0]["lanes"] == {"vector": {"rank": 2, "score": pytest.approx(0.0, abs=0.1)}}


async def test_without_the_lane_nothing_changes_and_without_vectors_the_lane_says_so() -> None:
    async with in_process() as server:
        await server.create("v")
        await server.store("v", {"passages": {"a.md": WATER}})
        off = await search(server, "霧沢")
        status_off = await server.ok("GET", context_path("v", "/embeddings"))
    async with in_process(state=ServerState(vector_lane=True)) as server:
        await server.create("v")
        empty = await search(server, "霧沢")
        await server.store("v", {"passages": {"a.md": WATER, "b.md": RAINY}})
        status_on = await server.ok("GET", context_path("v", "/embeddings"))
    assert off["plan"]["contexts"][0]["lanes"]["vector"] == NO_PROVIDER  # type: ignore[index]
    assert "vector" not in off["hits"][0]["lanes"]  # type: ignore[index]
    assert status_off == {"provider_model": None}
    assert empty["plan"]["contexts"][0]["lanes"]["vector"] == {  # type: ignore[index]
        "ran": False,
        "reason": "no paragraph vectors exist yet — the embedding refresh has not covered "
        "this context",
    }
    assert status_on == {
        "passages": {"model": MODEL, "rows": 2, "width": 1024},
        "provider_model": MODEL,
    }


async def test_evidence_passage_items_name_the_vector_lanes() -> None:
    async with in_process(state=ServerState(vector_lane=True)) as server:
        await server.create("v")
        await server.store("v", {"passages": {"a.md": WATER, "b.md": "軟水の話"}})
        package = await server.ok(
            "POST",
            context_path("v", "/evidence"),
            {"origins": [], "text_fallback_query": "霧沢の伏流水は軟水", "semantic_floor": 0.0},
        )
    lanes = {item["passage"]["source"]: item["lane_ranks"] for item in package["items"]}
    assert lanes["a.md"] == [{"lane": "passage_fused", "rank": 1}]
    assert [entry["lane"] for entry in lanes["b.md"]] == ["passage_fused"]


def write_context(root: Path, name: str, context: object) -> None:
    folder = root / name
    folder.mkdir()
    (folder / "context.json").write_text(json.dumps(context), encoding="utf-8")
    (folder / "water.md").write_text(WATER, encoding="utf-8")


def test_a_corpus_folder_opts_one_context_into_the_lane(tmp_path: Path) -> None:
    write_context(tmp_path, "on", {"description": "d", "vector_lane": True})
    write_context(tmp_path, "off", {"description": "d"})
    state = ServerState()
    load_corpus_dir(state, tmp_path)
    on, off = state.contexts["on"], state.contexts["off"]
    assert on.vectors is not None and on.vectors.rows == 1
    assert off.vectors is None
    assert on.meta.description == "d"
    assert on.revision.config == 0  # the key is this server's, never part of the PUT body


def test_a_non_boolean_vector_lane_key_is_refused(tmp_path: Path) -> None:
    write_context(tmp_path, "bad", {"vector_lane": "yes"})
    with pytest.raises(InputError, match="vector_lane must be true or false"):
        load_corpus_dir(ServerState(), tmp_path)


def test_serve_switches() -> None:
    options = parse_args(["data", "--vector-lane", "--reranker"])
    assert options is not None
    assert (options.vector_lane, options.reranker) == (True, True)
    plain = parse_args(["data"])
    assert plain is not None and (plain.vector_lane, plain.reranker) == (False, False)
    with pytest.raises(InputError, match="--reranker takes no value"):
        parse_args(["data", "--reranker=yes"])
    with pytest.raises(InputError, match="--vector-lane given twice"):
        parse_args(["data", "--vector-lane", "--vector-lane"])

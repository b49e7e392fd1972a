"""The recall block's fast paths (slot grids, case-chunked join, list folds) vs a plain oracle.

The scorer matches expectations against a (case x rank) grid of hit keys
when the hits fit one, else joins them range by range of cases when both
tables are in case order; it computes per-case values over item slot
columns when cases are short, else folds DCG/IDCG over per-case lists
unless a case is long (then ``stats.grouped_sequential_sum``). These tests
score random runs through the production path (eval.jsonl loader ->
``build_tables`` -> ``score_cases``) with each path forced on and off through
the explicit :class:`~taguru_eval.score.match.Strategy` argument, and
compare every per-case value bit for bit with a direct transcription of
EVALUATE.md §4.1-§4.2.
"""

from __future__ import annotations

import dataclasses
import json
import math
import random
from typing import Any

import polars as pl
import pytest
from support.scoring import FAILED_PASSAGE

from taguru_eval.inputs.dataset import load_eval_text
from taguru_eval.score import match
from taguru_eval.score.cases import score_cases
from taguru_eval.score.match import FAST, PLAIN, Strategy
from taguru_eval.tables import build_tables
from taguru_eval.tables.shapes import LaneOutput

SOURCES = ["a.md", "b.md", "c.md", "d.md"]


def _random_run(rnd: random.Random, cases: int) -> tuple[list[dict[str, Any]], list[Any]]:
    """(eval.jsonl case lines, passage outcomes) with wildcard / multi-paragraph / rel-0 entries."""
    lines: list[dict[str, Any]] = []
    passages: list[Any] = []
    for index in range(cases):
        sources = [
            {
                "source": rnd.choice(SOURCES),
                "paragraphs": rnd.sample(range(5), rnd.randint(0, 3)),
                "relevance": rnd.randint(0, 3),
            }
            for _ in range(rnd.randint(0, 5))
        ]
        lines.append({"case_id": f"c{index}", "query": "q", "expected_sources": sources})
        if rnd.random() < 0.1:
            passages.append(FAILED_PASSAGE)
            continue
        hits = [
            {"source": rnd.choice(SOURCES), "paragraph": rnd.randint(0, 4), "score": 0.5}
            for _ in range(rnd.randint(0, 10))
        ]
        passages.append({"outcome": "searched", "hits": hits, "latency_ms": 1})
    return lines, passages


def _oracle(case: dict[str, Any], passage: Any) -> tuple[float, float, float] | None:
    """EVALUATE.md §4.2 transcribed: (recall_at_k, mrr, ndcg) or None when absent."""
    judged = [entry for entry in case["expected_sources"] if entry["relevance"] >= 1]
    if passage["outcome"] != "searched" or not judged:
        return None
    hits = passage["hits"]

    def first_rank(entry: dict[str, Any]) -> int | None:
        for rank, hit in enumerate(hits):
            if hit["source"] == entry["source"] and (
                not entry["paragraphs"] or hit["paragraph"] in entry["paragraphs"]
            ):
                return rank
        return None

    ranks = [first_rank(entry) for entry in judged]
    matched = sum(rank is not None for rank in ranks)
    best = min((rank for rank in ranks if rank is not None), default=None)
    dcg = 0.0
    for entry, rank in zip(judged, ranks, strict=True):
        if rank is not None:
            dcg += entry["relevance"] / math.log2(rank + 2)
    idcg = 0.0
    for position, relevance in enumerate(sorted((e["relevance"] for e in judged), reverse=True)):
        idcg += relevance / math.log2(position + 2)
    mrr = 0.0 if best is None else 1.0 / (best + 1.0)
    return matched / len(judged), mrr, min(dcg / idcg, 1.0)


def _score(
    lines: list[dict[str, Any]],
    passages: list[Any],
    shuffle_hits: random.Random | None = None,
    strategy: Strategy = FAST,
) -> pl.DataFrame:
    header = json.dumps({"taguru_eval": 1, "name": "fast-paths"})
    text = "\n".join([header, *(json.dumps(line) for line in lines)]) + "\n"
    eval_set = load_eval_text(text, "fast-paths.jsonl")
    outputs: list[LaneOutput] = [
        {
            "case_index": index,
            "case_id": case.case_id,
            "query": case.query,
            "cues": list(case.cues),
            "limit": case.effective_limit,
            "passage": passage,
            "checks": [],
            "calls": [],
        }
        for index, (case, passage) in enumerate(zip(eval_set.cases, passages, strict=True))
    ]
    tables = build_tables(outputs, "fast-paths")
    if shuffle_hits is not None:
        order = list(range(tables.hits.height))
        shuffle_hits.shuffle(order)
        tables = dataclasses.replace(tables, hits=tables.hits[order])
    return score_cases(eval_set, tables, strategy)


def _assert_matches_oracle(
    lines: list[dict[str, Any]], passages: list[Any], cases: pl.DataFrame
) -> None:
    for line, passage, row in zip(lines, passages, cases.iter_rows(named=True), strict=True):
        want = _oracle(line, passage)
        have = (row["recall_at_k"], row["mrr"], row["ndcg"])
        if want is None:
            assert have == (None, None, None), line["case_id"]
        else:
            # Bit for bit: same log2 values, same left-to-right fold.
            assert have == want, (line, passage)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("chunk_rows", [1, 7, 1_000_000])
@pytest.mark.parametrize("fold_max_items", [0, 2, 32])
def test_recall_block_matches_the_spec_oracle(
    seed: int, chunk_rows: int, fold_max_items: int
) -> None:
    # fold_max_items 0 forces the grouped_sequential_sum path, 32 the list fold,
    # 2 picks per run depending on its longest case. The slot paths are off.
    strategy = Strategy(
        slot_max_hits=0,
        slot_max_items=0,
        join_chunk_rows=chunk_rows,
        fold_max_items=fold_max_items,
    )
    rnd = random.Random(seed)
    lines, passages = _random_run(rnd, 250)
    _assert_matches_oracle(lines, passages, _score(lines, passages, strategy=strategy))


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("slot_max_hits", [0, 8, 32])
@pytest.mark.parametrize("slot_max_items", [0, 2, 8])
def test_slot_paths_match_the_spec_oracle(
    seed: int, slot_max_hits: int, slot_max_items: int
) -> None:
    # 0 turns a slot path off; 8 / 2 leave it on only for runs whose widest
    # case fits (random runs have up to 10 hits and 5 entries per case).
    strategy = Strategy(slot_max_hits=slot_max_hits, slot_max_items=slot_max_items)
    rnd = random.Random(100 + seed)
    lines, passages = _random_run(rnd, 250)
    _assert_matches_oracle(lines, passages, _score(lines, passages, strategy=strategy))


@pytest.mark.parametrize("seed", range(3))
def test_the_plain_and_the_fast_strategy_agree_bit_for_bit(seed: int) -> None:
    rnd = random.Random(200 + seed)
    lines, passages = _random_run(rnd, 250)
    fast = _score(lines, passages, strategy=FAST)
    assert fast.equals(_score(lines, passages, strategy=PLAIN))


def test_every_case_with_the_same_number_of_items_and_hits() -> None:
    # The dense layouts: every case has exactly 3 judged items and 4 hits.
    rnd = random.Random(7)
    lines: list[dict[str, Any]] = []
    passages: list[Any] = []
    for index in range(200):
        sources = [
            {
                "source": rnd.choice(SOURCES),
                "paragraphs": rnd.sample(range(5), rnd.randint(0, 1)),
                "relevance": rnd.randint(1, 3),
            }
            for _ in range(3)
        ]
        lines.append({"case_id": f"c{index}", "query": "q", "expected_sources": sources})
        hits = [
            {"source": rnd.choice(SOURCES), "paragraph": rnd.randint(0, 4), "score": 0.5}
            for _ in range(4)
        ]
        passages.append({"outcome": "searched", "hits": hits, "latency_ms": 1})
    _assert_matches_oracle(lines, passages, _score(lines, passages))


def test_hits_out_of_case_order_are_joined() -> None:
    rnd = random.Random(11)
    lines, passages = _random_run(rnd, 250)
    _assert_matches_oracle(lines, passages, _score(lines, passages, shuffle_hits=rnd))


def test_colliding_match_keys_fall_back_to_the_join(monkeypatch: pytest.MonkeyPatch) -> None:
    # Every source and locator shares one key: candidates are confirmed against
    # the real values, a false one is rejected and the join decides.
    def constant_keys(source: pl.Expr, paragraph: pl.Expr) -> tuple[pl.Expr, pl.Expr]:
        key = (source.str.len_bytes() * 0 + 1).cast(pl.UInt32)
        return key, key

    calls: list[int] = []
    join = match._first_ranks_by_join

    def counted_join(*args: Any) -> pl.Series:
        calls.append(1)
        return join(*args)

    monkeypatch.setattr(match, "_match_keys", constant_keys)
    monkeypatch.setattr(match, "_first_ranks_by_join", counted_join)
    rnd = random.Random(3)
    lines, passages = _random_run(rnd, 250)
    _assert_matches_oracle(lines, passages, _score(lines, passages))
    assert calls, "a false key match must send the run to the join"


def test_case_chunks_split_only_between_cases() -> None:
    left = pl.DataFrame({"c": [0, 0, 1, 2, 2, 2, 5]})
    right = pl.DataFrame({"k": [0, 1, 1, 1, 2, 3, 5, 5, 6]})
    chunks = match._case_chunks(left, "c", right, "k", chunk_rows=3)
    assert len(chunks) > 1
    assert pl.concat([a for a, _ in chunks]).equals(left)
    assert pl.concat([b for _, b in chunks]).equals(right)
    for a, b in chunks:
        if a.height and b.height:
            # every case of this chunk lives only here
            others = [other for other in chunks if other[1] is not b]
            for other_left, other_right in others:
                assert not set(a["c"]) & set(other_right["k"])
                assert not set(b["k"]) & set(other_left["c"])


def test_unsorted_frames_are_joined_whole() -> None:
    left = pl.DataFrame({"c": [2, 0, 1]})
    right = pl.DataFrame({"k": [0, 1, 2, 2, 3]})
    chunks = match._case_chunks(left, "c", right, "k", chunk_rows=2)
    assert len(chunks) == 1
    assert chunks[0][0] is left and chunks[0][1] is right

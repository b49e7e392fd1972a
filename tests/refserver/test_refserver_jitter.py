"""``serve --jitter SEED``: hits of equal score come in a seeded random order, drawn
afresh for every search, so one query can get another window each time."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from support.refserver import context_path, in_process
from support.run import write_files

from taguru_eval.cli.serve import main, parse_args
from taguru_refserver.corpus import load_corpus_dir
from taguru_refserver.passage_search import search_passages, shuffled_ties
from taguru_refserver.state import ServerState

TWIN = "The harbour lighthouse keeper lights the lamp at dusk."
SOURCES = ("a.md", "b.md", "c.md", "d.md")
QUERY = "lighthouse keeper lamp"


def tied_corpus(root: Path) -> Path:
    """One context, four sources whose first paragraph is the same text (equal BM25
    scores), and one source that only partly matches (a lower score)."""
    files = {f"tied/{source}": f"{TWIN}\n\nAbout {source}.\n" for source in SOURCES}
    files["tied/z.md"] = "A lamp.\n"
    return write_files(root, files)


def windows(state: ServerState, searches: int, limit: int = 5) -> list[list[str]]:
    context = state.context("tied")
    return [
        [
            str(hit["source"])
            for hit in search_passages(context, QUERY, limit, None, None, state.jitter).hits
        ]
        for _ in range(searches)
    ]


def test_without_jitter_ties_keep_the_source_order(tmp_path: Path) -> None:
    state = ServerState()
    load_corpus_dir(state, tied_corpus(tmp_path))
    assert windows(state, 3) == [[*SOURCES, "z.md"]] * 3


def test_jitter_permutes_only_the_tied_hits_and_moves_on_every_search(tmp_path: Path) -> None:
    state = ServerState(jitter=1)
    load_corpus_dir(state, tied_corpus(tmp_path))
    seen = windows(state, 20)
    # The lower-scored hit stays last; the four tied ones are a permutation.
    assert all(window[-1] == "z.md" and sorted(window[:-1]) == list(SOURCES) for window in seen)
    assert len({tuple(window) for window in seen}) > 1
    # With limit 1 the one served hit is any of the tied four.
    assert {window[0] for window in windows(state, 40, limit=1)} == set(SOURCES)


def test_the_same_seed_gives_the_same_orders(tmp_path: Path) -> None:
    corpus = tied_corpus(tmp_path)
    orders = []
    for _ in range(2):
        state = ServerState(jitter=7)
        load_corpus_dir(state, corpus)
        orders.append(windows(state, 10))
    assert orders[0] == orders[1]
    other = ServerState(jitter=8)
    load_corpus_dir(other, corpus)
    assert windows(other, 10) != orders[0]


def test_shuffled_ties_never_reorders_different_scores() -> None:
    ranked = [(3.0, ("a", 0), {}), (2.0, ("b", 0), {}), (2.0, ("c", 0), {}), (1.0, ("d", 0), {})]
    for seed in range(20):
        shuffled = shuffled_ties(ranked, random.Random(seed))
        assert [row[0] for row in shuffled] == [3.0, 2.0, 2.0, 1.0]
        assert shuffled[0][1] == ("a", 0) and shuffled[-1][1] == ("d", 0)


async def test_the_search_route_draws_from_the_servers_generator(tmp_path: Path) -> None:
    state = ServerState(jitter=3)
    load_corpus_dir(state, tied_corpus(tmp_path))
    async with in_process(state=state) as server:
        served = set()
        for _ in range(30):
            result = await server.ok(
                "POST", context_path("tied", "/sources/search"), {"query": QUERY, "limit": 1}
            )
            served.add(result["hits"][0]["source"])
    assert served == set(SOURCES)


def test_the_flag_takes_a_u64_seed(capsys: pytest.CaptureFixture[str]) -> None:
    options = parse_args(["corpus", "--jitter", "18446744073709551615"])
    assert options is not None and options.jitter == 2**64 - 1
    plain = parse_args(["corpus"])
    assert plain is not None and plain.jitter is None
    for bad in ("-1", "x", "18446744073709551616", ""):
        assert main(["corpus", "--jitter", bad]) == 2
        err = capsys.readouterr().err
        assert err == (
            f"taguru_eval serve: --jitter must be an integer in 0..2^64-1 (got {bad!r})\n"
        )
    assert main(["--help"]) == 0
    assert "--jitter SEED" in capsys.readouterr().out

"""Passage search over one context (HTTP.md §6.5, §9.4): lanes, fusion and plan.

``POST …/sources/search`` and the evidence passage lane (§9.10 step 4) both
call :func:`search_passages`. The lexical lane is BM25; the vector lane runs
only where the context has the opt-in toy vectors (``vectors.py``), and
otherwise reports taguru's verbatim "no provider" reason. When the vector lane
ran, every hit is scored on the reciprocal-rank scale — Σ 1/(60 + lane rank)
in binary32 — even when no vector candidate cleared the floor, as the
reference does (its #601); otherwise a hit's score is its raw BM25 score.

Hits of equal score are ordered by source and paragraph, so a search is
deterministic. A server given ``--jitter SEED`` orders them at random instead,
drawing from one seeded generator every search advances: the same query can
then get another order — and, where a tie straddles the limit, another window
— each time, as a server with an approximate vector index does.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

from taguru_eval._base.text import F32
from taguru_refserver.bm25 import f32, has_searchable_terms
from taguru_refserver.model import ContextState
from taguru_refserver.routes_bodies import clamp_unit

DEFAULT_SEARCH_LIMIT = 5
DEFAULT_SEMANTIC_FLOOR = 0.35  # taguru's server default (TAGURU_SEMANTIC_FLOOR unset)
RRF_K = 60.0

NO_PROVIDER = "no embedding provider is configured"
NO_VECTORS = "no paragraph vectors exist yet — the embedding refresh has not covered this context"
ZERO_LIMIT = "the requested limit is 0"
NO_TERMS = "the query yields no searchable terms"


_Ranked = tuple[float, tuple[str, int], dict[str, tuple[int, float]]]
"""One candidate of a search: its score, its (source, paragraph), its lane ranks."""


def lane_pool(limit: int) -> int:
    """How many candidates each lane contributes before fusion."""
    return max(4 * limit, 50)


@dataclass(frozen=True)
class PassageSearch:
    """One search's ``lanes`` plan (``bm25`` and ``vector`` LanePlans) and its wire hits.

    ``skipped`` is the reason both lanes were skipped (zero limit, no terms),
    None when the lexical lane ran.
    """

    lanes: dict[str, object]
    hits: list[dict[str, object]]
    skipped: str | None = None


def effective_floor(context: ContextState, override: float | None) -> float:
    """The vector floor: request override (clamped) > context setting > 0.35, as binary32."""
    if override is not None:
        return f32(clamp_unit(override))
    if context.meta.semantic_floor is not None:
        return f32(context.meta.semantic_floor)
    return f32(DEFAULT_SEMANTIC_FLOOR)


def search_passages(
    context: ContextState,
    query: str,
    limit: int,
    eligible: Callable[[str], bool] | None,
    floor_override: float | None,
    jitter: random.Random | None = None,
) -> PassageSearch:
    """Up to ``limit`` paragraphs best first (score desc, source asc, paragraph asc);
    with ``jitter``, tied hits in an order drawn from it instead."""
    for reason, applies in ((ZERO_LIMIT, limit == 0), (NO_TERMS, not has_searchable_terms(query))):
        if applies:
            skipped = {"ran": False, "reason": reason}
            return PassageSearch({"bm25": skipped, "vector": dict(skipped)}, [], reason)
    pool = lane_pool(limit)
    lexical = context.passage_index.search(query, pool, eligible)
    # (source, paragraph) -> {lane: (rank, raw score)}
    evidence: dict[tuple[str, int], dict[str, tuple[int, float]]] = {}
    for rank, lexical_hit in enumerate(lexical, start=1):
        evidence[(lexical_hit.source, lexical_hit.paragraph)] = {"bm25": (rank, lexical_hit.score)}
    vectors = context.vectors
    vector_plan: dict[str, object]
    if vectors is None:
        vector_plan = {"ran": False, "reason": NO_PROVIDER}
    elif vectors.rows == 0:
        vector_plan = {"ran": False, "reason": NO_VECTORS}
    else:
        floor = effective_floor(context, floor_override)
        vector_plan = {"ran": True, "floor": F32(floor)}
        for rank, hit in enumerate(vectors.search(query, pool, floor, eligible), start=1):
            evidence.setdefault((hit.source, hit.paragraph), {})["vector"] = (rank, hit.score)
    fused = vector_plan["ran"] is True

    def score(lanes: dict[str, tuple[int, float]]) -> float:
        if not fused:
            return lanes["bm25"][1]
        total = 0.0
        for lane in ("bm25", "vector"):
            if lane in lanes:
                total = f32(total + f32(1.0 / (RRF_K + lanes[lane][0])))
        return total

    ranked = sorted(
        ((score(lanes), key, lanes) for key, lanes in evidence.items()),
        key=lambda row: (-row[0], row[1][0], row[1][1]),
    )
    if jitter is not None:
        ranked = shuffled_ties(ranked, jitter)
    # taguru's PassageHit field order; a lane that did not find the hit is left out.
    hits = [
        {
            "source": source,
            "paragraph": paragraph,
            "score": F32(value),
            "text": context.passages[source].paragraphs[paragraph],
            "lanes": {
                lane: {"rank": lanes[lane][0], "score": F32(lanes[lane][1])}
                for lane in ("bm25", "vector")
                if lane in lanes
            },
        }
        for value, (source, paragraph), lanes in ranked[:limit]
    ]
    return PassageSearch({"bm25": {"ran": True}, "vector": vector_plan}, hits)


def shuffled_ties(ranked: list[_Ranked], jitter: random.Random) -> list[_Ranked]:
    """``ranked`` (best first) with every run of equal scores in a random order;
    one draw per row, so each search moves the generator on."""
    draws = [jitter.random() for _ in ranked]
    order = sorted(range(len(ranked)), key=lambda index: (-ranked[index][0], draws[index]))
    return [ranked[index] for index in order]

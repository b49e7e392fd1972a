"""Matching expected sources against served hits: the fast engine and the plain join.

Matching is columnar: a grid of hit keys compared rank by rank when the hits
are in case order with small ranks, else a chunked ordered join. Both give
the first satisfying rank of every judged expectation; tests hold them equal."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Protocol

import polars as pl


class HasExpected(Protocol):
    """Anything carrying the eval set's ``expected`` frame (``dataset.EvalSet``),
    typed as :data:`taguru_eval.tables.schemas.EXPECTED`."""

    @property
    def expected(self) -> pl.DataFrame: ...


@dataclass(frozen=True)
class Strategy:
    """Which engine computes the match and the recall folds, and up to what size.

    Results never depend on it (the tests hold every strategy equal to the
    spec's oracle); it only trades speed. ``slot_max_hits`` / ``slot_max_items``
    bound the slot layouts (0 turns them off), ``join_chunk_rows`` is the
    right-side rows per chunk of a case-chunked join (a hash table that stays
    cache-sized), ``fold_max_items`` the longest case folded as a list (longer
    runs use the grouped sequential sum).
    """

    slot_max_hits: int = 32
    slot_max_items: int = 8
    join_chunk_rows: int = 200_000
    fold_max_items: int = 32


FAST: Final = Strategy()
"""The default: slot layouts where a run fits them, chunked joins and list folds."""

PLAIN: Final = Strategy(slot_max_hits=0, slot_max_items=0, fold_max_items=0)
"""The reference path: one join per chunk and grouped sequential sums, no slot layout."""


def _case_chunks(
    left: pl.DataFrame,
    left_case: str,
    right: pl.DataFrame,
    right_case: str,
    chunk_rows: int = FAST.join_chunk_rows,
) -> list[tuple[pl.DataFrame, pl.DataFrame]]:
    """Pairs of slices of ``left`` and ``right`` covering the same range of cases.

    A join on a key that includes the case only pairs rows of the same case,
    so when both frames are in case order it can run range by range: each
    hash table then fits in cache, which on a million cases is about twice as
    fast as one big join. Frames not in case order come back whole.
    """
    left_cases = left.get_column(left_case)
    right_cases = right.get_column(right_case)
    if right.height <= chunk_rows or not left_cases.is_sorted() or not right_cases.is_sorted():
        return [(left, right)]
    # Chunk boundaries are case values, so a case never straddles two chunks.
    bounds = right_cases.gather(list(range(chunk_rows, right.height, chunk_rows)))
    bounds = bounds.unique(maintain_order=True)
    left_cuts = [0, *left_cases.search_sorted(bounds).to_list(), left.height]
    right_cuts = [0, *right_cases.search_sorted(bounds).to_list(), right.height]
    return [
        (
            left.slice(left_cuts[i], left_cuts[i + 1] - left_cuts[i]),
            right.slice(right_cuts[i], right_cuts[i + 1] - right_cuts[i]),
        )
        for i in range(len(left_cuts) - 1)
    ]


_HASH_SEED = 1


def _match_keys(source: pl.Expr, paragraph: pl.Expr) -> tuple[pl.Expr, pl.Expr]:
    """32-bit keys of a source, and of a (source, paragraph) locator.

    Equal sources (locators) always get equal keys, so a key mismatch proves
    "no match"; a key match is only a candidate that is confirmed by
    comparing the real values. Two paragraphs of one source (both in
    ``0..2**32``) never share a locator key.
    """
    hashed = source.hash(seed=_HASH_SEED)
    source_key = (hashed // (1 << 32)).cast(pl.UInt32, wrap_numerical=True)
    # A quarter of the hash leaves room to add any paragraph below 2**32 without overflow.
    locator_key = ((hashed // 4).reinterpret(signed=True) + paragraph).cast(
        pl.UInt32, wrap_numerical=True
    )
    return source_key, locator_key


@dataclass(frozen=True)
class _HitSlots:
    """The hits laid out as a (case x slot) grid, slot = rank (see :func:`_hit_slots`)."""

    width: int
    cases: int
    keys: pl.Series
    """Locator keys of the grid (``cases * width``), then its source keys (as many)."""
    rows: pl.Series | None
    """Hit row of each grid cell (null where no hit); None when cell i is row i."""


def _hit_slots(hits: pl.DataFrame, max_hits: int) -> _HitSlots | None:
    """The hits as a grid of ``width`` slots per case, or None when they do not fit one.

    They fit when ranks are ``0..width-1`` with ``width <= max_hits``,
    the rows are in (case, rank) order with no rank repeated in a case, and
    paragraphs lie in ``0..2**32``. A case's hits then sit at cells
    ``case * width + rank``, so the ``j``-th cell of a case is its rank-``j``
    hit (if any) and the first matching cell is the first satisfying rank.
    """
    if hits.height == 0:
        return None
    bounds = hits.select(
        pl.col("case_index").min().alias("case_min"),
        pl.col("case_index").max().alias("case_max"),
        pl.col("rank").min().alias("rank_min"),
        pl.col("rank").max().alias("rank_max"),
        pl.col("paragraph").min().alias("paragraph_min"),
        pl.col("paragraph").max().alias("paragraph_max"),
        (
            pl.col("case_index").null_count()
            + pl.col("rank").null_count()
            + pl.col("paragraph").null_count()
        ).alias("nulls"),
    ).row(0, named=True)
    if (
        bounds["nulls"]
        or bounds["case_min"] < 0
        or bounds["rank_min"] < 0
        or bounds["rank_max"] >= max_hits
        or bounds["paragraph_min"] < 0
        or bounds["paragraph_max"] >= 1 << 32
    ):
        return None
    width = int(bounds["rank_max"]) + 1
    cases = int(bounds["case_max"]) + 1
    size = cases * width
    # A grid far larger than the hits (sparse case numbers) is not worth building.
    if size > 4 * hits.height + 4096:
        return None
    source_key, locator_key = _match_keys(pl.col("source"), pl.col("paragraph"))
    # Lazy, so the common hash is computed once.
    keys = (
        hits.lazy()
        .select(
            (pl.col("case_index").cast(pl.Int64) * width + pl.col("rank")).alias("cell"),
            locator_key.alias("locator"),
            source_key.alias("source"),
        )
        .collect()
    )
    cells = keys.get_column("cell")
    # Strictly increasing cells: sorted by (case, rank), no rank twice in a case.
    if hits.height > 1 and not (cells.slice(1) > cells.slice(0, hits.height - 1)).all():
        return None
    locator, source = keys.get_column("locator"), keys.get_column("source")
    rows: pl.Series | None = None
    if size != hits.height:
        # Empty cells keep key 0; a real key 0 meeting one is caught by the row check.
        empty = pl.zeros(size, dtype=pl.UInt32, eager=True)
        locator, source = empty.scatter(cells, locator), empty.clone().scatter(cells, source)
        rows = (
            pl.Series("row", [], dtype=pl.Int64)
            .extend_constant(None, size)
            .scatter(cells, pl.int_range(hits.height, dtype=pl.Int64, eager=True))
        )
    return _HitSlots(
        width=width, cases=cases, keys=pl.concat([locator, source], rechunk=True), rows=rows
    )


def _first_ranks_by_slots(
    candidates: pl.DataFrame, hits: pl.DataFrame, max_hits: int
) -> pl.Series | None:
    """Per candidate row (``case_index``, ``source``, ``paragraph``), its first satisfying rank.

    Each row compares its key with its case's grid cells, rank by rank: one
    gather and one comparison per rank for all rows at once, instead of a
    hash join. None when the hits do not fit a grid, or (astronomically
    rarely) when two distinct sources share a key on a chosen hit: the
    caller then joins.
    """
    if candidates.height == 0:
        return pl.Series("first_rank", [], dtype=hits.schema["rank"])
    slots = _hit_slots(hits, max_hits)
    if slots is None:
        return None
    size = slots.cases * slots.width
    wildcard = pl.col("paragraph").is_null()
    source_key, locator_key = _match_keys(pl.col("source"), pl.col("paragraph"))
    case = pl.col("case_index").cast(pl.Int64)
    # Wildcards read the source keys, stored after the locator keys; a case
    # beyond the grid has no hits (null base: nothing matches).
    base = pl.when(case < slots.cases).then(
        case * slots.width + pl.when(wildcard).then(pl.lit(size, dtype=pl.Int64)).otherwise(0)
    )
    first: pl.Expr = pl.lit(None, dtype=pl.Int32)
    # Highest rank first, so a lower matching rank overwrites it.
    for rank in reversed(range(slots.width)):
        # The grid shifted by ``rank`` cells, zero-copy: cell base + rank.
        cell_key = pl.lit(slots.keys.slice(rank)).gather(pl.col("base"))
        first = (
            pl.when(cell_key == pl.col("key")).then(pl.lit(rank, dtype=pl.Int32)).otherwise(first)
        )
    cell = pl.col("base") % size + pl.col("first_rank").cast(pl.Int64)
    row = cell if slots.rows is None else pl.lit(slots.rows).gather(cell)
    # Every chosen hit is confirmed with the real source and paragraph.
    confirmed = pl.col("first_rank").is_null() | (
        row.is_not_null()
        & (pl.col("source") == pl.lit(hits.get_column("source")).gather(row))
        & (wildcard | (pl.col("paragraph") == pl.lit(hits.get_column("paragraph")).gather(row)))
    )
    # Lazy: the engine runs these column-wide steps much faster than eager calls.
    result = (
        candidates.lazy()
        .select(
            "source",
            "paragraph",
            base.alias("base"),
            pl.when(wildcard).then(source_key).otherwise(locator_key).alias("key"),
        )
        .with_columns(first.alias("first_rank"))
        .select("first_rank", confirmed.fill_null(False).all().alias("confirmed"))
        .collect()
    )
    if result.height and not result.item(0, "confirmed"):
        return None
    return result.get_column("first_rank").cast(hits.schema["rank"])


def _first_ranks_by_join(
    candidates: pl.DataFrame, hits: pl.DataFrame, items: int, chunk_rows: int
) -> pl.Series:
    """Per item (dense ``item`` numbers of ``candidates``), its first satisfying rank (join)."""
    # Join on a 64-bit key of (case, source) — the source's hash plus the case
    # number (wrapping) — then keep exact matches only: hashing once is cheaper
    # than a two-column string join, and the equality filter makes a key
    # collision harmless.
    key = pl.col("source").hash(seed=_HASH_SEED) + pl.col("case_index").cast(pl.UInt64)
    served = hits.select(
        key.alias("key"),
        pl.col("case_index").alias("hit_case_index"),
        pl.col("source").alias("hit_source"),
        pl.col("paragraph").alias("hit_paragraph"),
        "rank",
    )
    left_side = candidates.select("item", "case_index", "source", "paragraph", key.alias("key"))
    first_ranks = pl.concat(
        [
            left.join(right, on="key", how="inner")
            .filter(
                (pl.col("case_index") == pl.col("hit_case_index"))
                & (pl.col("source") == pl.col("hit_source"))
                & (pl.col("paragraph").is_null() | (pl.col("paragraph") == pl.col("hit_paragraph")))
            )
            # An item belongs to one case, so its minimum is complete within its chunk.
            .group_by("item")
            .agg(pl.col("rank").min())
            for left, right in _case_chunks(
                left_side, "case_index", served, "hit_case_index", chunk_rows
            )
        ]
    )
    # Item numbers are dense row positions of ``items``: scatter instead of a join.
    return (
        pl.Series("first_rank", [], dtype=hits.schema["rank"])
        .extend_constant(None, items)
        .scatter(first_ranks.get_column("item"), first_ranks.get_column("rank"))
    )


def judged_items(
    expected: pl.DataFrame,
    searched: pl.DataFrame,
    hits: pl.DataFrame,
    strategy: Strategy = FAST,
) -> pl.DataFrame:
    """One row per judged expectation of a searched case with its first satisfying rank.

    A source row with a null paragraph is a wildcard (any paragraph of the
    source); an entry listing several paragraphs has one row per paragraph
    and is satisfied by any of them (§4.1, §4.2). Items keep the expected
    frame's order (case, then declaration).
    """
    judged = expected.filter(
        (pl.col("kind") == "source")
        & (pl.col("relevance") >= 1)
        & pl.col("case_index").is_in(searched.get_column("case_index").implode())
    )
    # The loader writes an entry's paragraph rows next to each other, so a
    # running count of entry starts numbers the items 0, 1, 2 … densely.
    entry_starts = (
        (pl.col("case_index") != pl.col("case_index").shift(1))
        | (pl.col("entry_index") != pl.col("entry_index").shift(1))
    ).fill_null(True)
    starts = judged.select(entry_starts.alias("start")).to_series()
    one_row_per_item = bool(starts.all())
    if not one_row_per_item:
        judged = judged.with_columns((starts.cum_sum() - 1).cast(pl.UInt32).alias("item"))
    items = judged.filter(starts).select("case_index", "entry_index", "source", "relevance")
    by_rows = _first_ranks_by_slots(judged, hits, strategy.slot_max_hits)
    if by_rows is None:
        if one_row_per_item:
            judged = judged.with_columns(pl.int_range(pl.len(), dtype=pl.UInt32).alias("item"))
        first_rank = _first_ranks_by_join(judged, hits, items.height, strategy.join_chunk_rows)
    elif one_row_per_item:
        first_rank = by_rows
    else:
        # An item's rows are consecutive: the minimum over each run of ``item``.
        first_rank = (
            judged.select(pl.col("item").set_sorted(), by_rows.alias("first_rank"))
            .group_by("item", maintain_order=True)
            .agg(pl.col("first_rank").min())
            .get_column("first_rank")
        )
    return items.with_columns(first_rank.alias("first_rank"))


def _in_case_order(frame: pl.DataFrame, within: pl.Expr) -> pl.DataFrame:
    """``frame`` ordered by case, then ``within`` (a non-negative integer < 2**32).

    One 64-bit key instead of a multi-column sort (which row-encodes every
    column); skipped when the frame is already in that order. ``case_index``
    comes back flagged sorted, so group-bys on it slice runs instead of hashing.
    """
    order = pl.col("case_index").cast(pl.UInt64) * (1 << 32) + within.cast(pl.UInt64)
    keys = frame.select(order.alias("__order")).get_column("__order")
    if not keys.is_sorted():
        frame = frame.with_columns(keys).sort("__order", maintain_order=True).drop("__order")
    return frame.with_columns(pl.col("case_index").set_sorted())

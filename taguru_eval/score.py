"""Scoring (EVALUATE.md §4) and aggregation (§5.2) as Polars expressions.

Everything here is a pure function of the run's tables and the eval set's
``expected`` frame: matching expectations to hits is columnar (a grid of
hit keys compared rank by rank when the hits are in case order with small
ranks, else a join), per-case values are column-wide slot operations or
group-by aggregations, and every Distribution goes through
:mod:`taguru_eval.stats`. No score served by the server is ever read.

Sums whose last bit matters (DCG, IDCG) are sequential left-to-right folds
in a fixed order, and ``log2`` comes from the C library (Polars' ``log(2)``
divides natural logs and differs in the last bit for about a third of the
integers).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import polars as pl

from taguru_eval import catalog
from taguru_eval.normalize import normalize_entry
from taguru_eval.stats import (
    DISTRIBUTION_KEYS,
    distribution_frame,
    grouped_sequential_sum,
    position_in_group,
    ratio,
)
from taguru_eval.tables import CASES, METRICS, RunTables, conform

MISSED_CAP = 3
POSITIONS = ("subject", "label", "object")


class HasExpected(Protocol):
    """Anything carrying the eval set's ``expected`` frame (``dataset.EvalSet``)."""

    @property
    def expected(self) -> pl.DataFrame: ...


@dataclass(frozen=True)
class Scores:
    """The per-case frame (``cases``) and the aggregate metrics of one run."""

    cases: pl.DataFrame
    metrics: dict[str, dict[str, Any]]
    metrics_frame: pl.DataFrame


# ---------------------------------------------------------------------------
# Small expression helpers
# ---------------------------------------------------------------------------


def _normalized(column: str) -> pl.Expr:
    """``normalize_entry`` of a string column (folded once per distinct value)."""

    def fold(series: pl.Series) -> pl.Series:
        distinct = series.unique().drop_nulls().to_list()
        mapping = {value: normalize_entry(value) for value in distinct}
        return series.replace_strict(mapping, default=None, return_dtype=pl.String)

    return pl.col(column).map_batches(fold, return_dtype=pl.String)


def _log2_of_position_plus_two(positions: pl.Expr, largest: int) -> pl.Expr:
    """``log2(position + 2)`` from the C library for positions ``0..=largest``; null stays null."""
    table = pl.Series([math.log2(position + 2) for position in range(max(largest, 0) + 1)])
    return pl.lit(table, dtype=pl.Float64).gather(positions)


def citation_is_valid() -> pl.Expr:
    """EVALUATE.md §3.6: resolved, section not mismatched, any declared quote matched."""
    return (
        (pl.col("outcome") == "resolved")
        & (pl.col("section_check").fill_null("") != "mismatched")
        & (pl.col("quote_declared").is_null() | pl.col("quote_matched").fill_null(False))
    )


def _expected(eval_set: HasExpected) -> pl.DataFrame:
    frame = eval_set.expected
    return frame.with_columns(
        pl.col("case_index").cast(pl.Int32),
        pl.col("paragraph").cast(pl.Int64),
        pl.col("relevance").cast(pl.Int64),
        pl.col("entry_index").cast(pl.Int32),
    )


# ---------------------------------------------------------------------------
# Per-case blocks
# ---------------------------------------------------------------------------


_JOIN_CHUNK_ROWS = 200_000
"""Right-side rows per chunk of a case-chunked join (a hash table that stays cache-sized)."""


def _case_chunks(
    left: pl.DataFrame, left_case: str, right: pl.DataFrame, right_case: str
) -> list[tuple[pl.DataFrame, pl.DataFrame]]:
    """Pairs of slices of ``left`` and ``right`` covering the same range of cases.

    A join on a key that includes the case only pairs rows of the same case,
    so when both frames are in case order it can run range by range: each
    hash table then fits in cache, which on a million cases is about twice as
    fast as one big join. Frames not in case order come back whole.
    """
    left_cases = left.get_column(left_case)
    right_cases = right.get_column(right_case)
    if (
        right.height <= _JOIN_CHUNK_ROWS
        or not left_cases.is_sorted()
        or not right_cases.is_sorted()
    ):
        return [(left, right)]
    # Chunk boundaries are case values, so a case never straddles two chunks.
    bounds = right_cases.gather(list(range(_JOIN_CHUNK_ROWS, right.height, _JOIN_CHUNK_ROWS)))
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


_SLOT_MAX_HITS = 32
"""Up to this many hits per case (largest rank + 1), expectations meet hits slot by slot."""

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


def _hit_slots(hits: pl.DataFrame) -> _HitSlots | None:
    """The hits as a grid of ``width`` slots per case, or None when they do not fit one.

    They fit when ranks are ``0..width-1`` with ``width <= _SLOT_MAX_HITS``,
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
        or bounds["rank_max"] >= _SLOT_MAX_HITS
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


def _first_ranks_by_slots(candidates: pl.DataFrame, hits: pl.DataFrame) -> pl.Series | None:
    """Per candidate row (``case_index``, ``source``, ``paragraph``), its first satisfying rank.

    Each row compares its key with its case's grid cells, rank by rank: one
    gather and one comparison per rank for all rows at once, instead of a
    hash join. None when the hits do not fit a grid, or (astronomically
    rarely) when two distinct sources share a key on a chosen hit: the
    caller then joins.
    """
    if candidates.height == 0:
        return pl.Series("first_rank", [], dtype=hits.schema["rank"])
    slots = _hit_slots(hits)
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


def _first_ranks_by_join(candidates: pl.DataFrame, hits: pl.DataFrame, items: int) -> pl.Series:
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
            for left, right in _case_chunks(left_side, "case_index", served, "hit_case_index")
        ]
    )
    # Item numbers are dense row positions of ``items``: scatter instead of a join.
    return (
        pl.Series("first_rank", [], dtype=hits.schema["rank"])
        .extend_constant(None, items)
        .scatter(first_ranks.get_column("item"), first_ranks.get_column("rank"))
    )


def _judged_items(
    expected: pl.DataFrame, searched: pl.DataFrame, hits: pl.DataFrame
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
    by_rows = _first_ranks_by_slots(judged, hits)
    if by_rows is None:
        if one_row_per_item:
            judged = judged.with_columns(pl.int_range(pl.len(), dtype=pl.UInt32).alias("item"))
        first_rank = _first_ranks_by_join(judged, hits, items.height)
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


_FOLD_MAX_ITEMS = 32
"""Up to this many judged items per case, DCG/IDCG fold as list expressions (one pass)."""


def _fold_left(lists: pl.Expr, lengths: pl.Expr, longest: int) -> pl.Expr:
    """Left-to-right IEEE sum from 0.0 of each list's elements (``longest`` = max length)."""
    total = pl.lit(0.0, dtype=pl.Float64)
    for position in range(longest):
        element = lists.list.get(position, null_on_oob=True)
        total = pl.when(lengths > position).then(total + element).otherwise(total)
    return total


_SLOT_MAX_ITEMS = 8
"""Up to this many judged items per case, the recall block is computed slot by slot."""

_SLOT_MAX_RELEVANCE = 4096
"""Largest relevance the slot path tabulates ideal gains for (the loader allows 0..=3)."""


def _sorted_descending(frame: pl.LazyFrame, columns: list[str]) -> pl.LazyFrame:
    """``columns`` sorted descending across each row (odd-even transposition network).

    ``len(columns)`` rounds of compare-exchange between neighbours sort any
    row; each round is a handful of column-wide min/max operations.
    """
    for round_number in range(len(columns)):
        exchanges: list[pl.Expr] = []
        for left in range(round_number % 2, len(columns) - 1, 2):
            upper, lower = pl.col(columns[left]), pl.col(columns[left + 1])
            exchanges += [
                pl.max_horizontal(upper, lower).alias(columns[left]),
                pl.min_horizontal(upper, lower).alias(columns[left + 1]),
            ]
        if exchanges:
            frame = frame.with_columns(exchanges)
    return frame


def _recall_blocks_by_slots(gains: pl.DataFrame) -> pl.DataFrame | None:
    """Per-case recall columns from each case's items spread over ``width`` slot columns.

    ``gains`` is in case order. Slot ``e`` of a case is its ``e``-th item
    (declaration order), null past its last item; every per-case value is then
    a few column-wide operations on as many rows as cases, with no group-by
    or sort. None when a case has more than ``_SLOT_MAX_ITEMS`` items.
    """
    if gains.height == 0:
        return None
    runs = gains.get_column("case_index").rle().struct.unnest()
    shortest, width = runs.select(pl.col("len").min(), pl.col("len").max().alias("longest")).row(0)
    top_relevance = int(gains.select(pl.col("relevance").max()).item() or 0)
    if width > _SLOT_MAX_ITEMS or top_relevance > _SLOT_MAX_RELEVANCE:
        return None
    relevance_columns = [f"relevance_{slot}" for slot in range(width)]
    rank_columns = [f"first_rank_{slot}" for slot in range(width)]
    relevance, first_rank = pl.col("relevance").cast(pl.Int64), pl.col("first_rank")
    if shortest == width:
        # Every case has ``width`` items: slot e of case i is row i * width + e.
        slot_columns = [
            pl.col("case_index").gather_every(width, 0),
            pl.lit(width, dtype=pl.Int64).alias("recall_expected_total"),
            *(
                relevance.gather_every(width, slot).alias(relevance_columns[slot])
                for slot in range(width)
            ),
            *(
                first_rank.gather_every(width, slot).alias(rank_columns[slot])
                for slot in range(width)
            ),
        ]
    else:
        starts = runs.select(
            pl.col("value").alias("case_index"),
            pl.col("len").cast(pl.Int64).alias("recall_expected_total"),
            *(
                pl.when(pl.col("len") > slot)
                .then((pl.col("len").cum_sum() - pl.col("len")).cast(pl.Int64) + slot)
                .alias(f"row_{slot}")
                for slot in range(width)
            ),
        )
        slot_columns = [
            pl.lit(starts.get_column("case_index")),
            pl.lit(starts.get_column("recall_expected_total")),
            *(
                relevance.gather(pl.lit(starts.get_column(f"row_{slot}"))).alias(
                    relevance_columns[slot]
                )
                for slot in range(width)
            ),
            *(
                first_rank.gather(pl.lit(starts.get_column(f"row_{slot}"))).alias(
                    rank_columns[slot]
                )
                for slot in range(width)
            ),
        ]
    frame = gains.lazy().select(slot_columns).with_columns(pl.col(relevance_columns).fill_null(0))
    largest = max(int(gains.select(pl.col("first_rank").max()).item() or 0), width - 1)
    # An unsatisfied item or an empty slot adds 0.0 to the left-to-right fold,
    # which changes nothing; divisions are column by column (see _recall_blocks).
    slot_gains = [
        (
            pl.col(relevance_name)
            / _log2_of_position_plus_two(pl.col(rank_name).cast(pl.Int64), largest)
        ).fill_null(0.0)
        for relevance_name, rank_name in zip(relevance_columns, rank_columns, strict=True)
    ]
    dcg = slot_gains[0]
    for gain in slot_gains[1:]:
        dcg = dcg + gain
    frame = frame.with_columns(dcg.alias("dcg"))
    # The ideal order: relevances sorted descending; empty slots (0) sort last.
    frame = _sorted_descending(frame, relevance_columns)
    ideal_gains = [
        pl.lit(
            pl.Series(
                [
                    relevance_value / math.log2(slot + 2)
                    for relevance_value in range(top_relevance + 1)
                ],
                dtype=pl.Float64,
            )
        ).gather(pl.col(name))
        for slot, name in enumerate(relevance_columns)
    ]
    idcg = ideal_gains[0]
    for gain in ideal_gains[1:]:
        idcg = idcg + gain
    per_case = frame.select(
        "case_index",
        "recall_expected_total",
        pl.sum_horizontal(pl.col(name).is_not_null().cast(pl.Int64) for name in rank_columns)
        .cast(pl.Int64)
        .alias("recall_matched"),
        pl.min_horizontal(pl.col(name) for name in rank_columns).alias("best_rank"),
        "dcg",
        idcg.alias("idcg"),
    )
    return _recall_values(per_case)


def _recall_values(per_case: pl.LazyFrame) -> pl.DataFrame:
    """The §4.2 values from per-case counts, best rank, DCG and IDCG."""
    return per_case.select(
        "case_index",
        "recall_expected_total",
        "recall_matched",
        (pl.col("recall_matched") / pl.col("recall_expected_total")).alias("recall_at_k"),
        pl.when(pl.col("best_rank").is_not_null())
        .then(1.0 / (pl.col("best_rank").cast(pl.Float64) + 1.0))
        .otherwise(0.0)
        .alias("mrr"),
        pl.min_horizontal(pl.col("dcg") / pl.col("idcg"), pl.lit(1.0)).alias("ndcg"),
    ).collect()


def _recall_blocks(items: pl.DataFrame) -> pl.DataFrame:
    """recall@k, MRR and graded nDCG per case (EVALUATE.md §4.2), in case order."""
    gains = _in_case_order(items, pl.col("entry_index"))
    by_slots = _recall_blocks_by_slots(gains)
    if by_slots is not None:
        return by_slots
    # Relevance descending within a case; ties are interchangeable (equal gains).
    ideal = _in_case_order(
        gains.select("case_index", "relevance"),
        255 - pl.col("relevance").cast(pl.Int64).clip(0, 255),
    ).with_columns(position_in_group("case_index").cast(pl.Int64).alias("ideal_position"))
    largest = int(
        max(
            items.select(pl.col("first_rank").max()).item() or 0,
            ideal.select(pl.col("ideal_position").max()).item() or 0,
        )
    )
    # Divisions are column by column: Polars divides by a scalar as a multiplication
    # by its reciprocal, which differs from IEEE division in the last bit.
    ideal_gain = ideal.select(
        pl.col("relevance") / _log2_of_position_plus_two(pl.col("ideal_position"), largest)
    ).to_series()
    gains = gains.with_columns(
        # An unsatisfied item adds 0.0 to the declaration-order fold, which changes nothing.
        (
            pl.col("relevance")
            / _log2_of_position_plus_two(pl.col("first_rank").cast(pl.Int64), largest)
        )
        .fill_null(0.0)
        .alias("gain"),
        # The ideal order only permutes rows within a case, so row i of both
        # frames belongs to the same case: the ideal gains line up by case run.
        ideal_gain.alias("ideal_gain"),
    )
    counts = [
        pl.len().cast(pl.Int64).alias("recall_expected_total"),
        pl.col("first_rank").count().cast(pl.Int64).alias("recall_matched"),
        pl.col("first_rank").min().alias("best_rank"),
    ]
    longest = int(gains.group_by("case_index").len().select(pl.col("len").max()).item() or 0)
    # ``case_index`` is flagged sorted, so these group-bys slice runs instead of hashing.
    if longest <= _FOLD_MAX_ITEMS:
        per_case = (
            gains.group_by("case_index", maintain_order=True)
            .agg(*counts, "gain", "ideal_gain")
            .with_columns(
                _fold_left(pl.col("gain"), pl.col("recall_expected_total"), longest).alias("dcg"),
                _fold_left(pl.col("ideal_gain"), pl.col("recall_expected_total"), longest).alias(
                    "idcg"
                ),
            )
        )
    else:
        per_case = gains.group_by("case_index", maintain_order=True).agg(*counts)
        # Both sums come out in ascending case order, like per_case.
        per_case = per_case.hstack(
            [
                grouped_sequential_sum(gains, "case_index", "gain", "dcg").get_column("dcg"),
                grouped_sequential_sum(gains, "case_index", "ideal_gain", "idcg").get_column(
                    "idcg"
                ),
            ]
        )
    return _recall_values(per_case.lazy())


def _entry_matches(expected: pl.DataFrame, resolutions: pl.DataFrame) -> pl.DataFrame:
    """Concept and label entries with ``matched`` (§4.3: equal after normalize_entry)."""
    names = (
        resolutions.filter(pl.col("name").is_not_null())
        .select("case_index", "kind", _normalized("name").alias("key"))
        .unique()
        .with_columns(pl.lit(True).alias("matched"))
    )
    entries = expected.filter(pl.col("kind").is_in(["concept", "label"])).with_columns(
        _normalized("text").alias("key")
    )
    return (
        entries.join(names, on=["case_index", "kind", "key"], how="left")
        .with_columns(pl.col("matched").fill_null(False))
        .sort(["case_index", "kind", "entry_index"])
    )


def _coverage_blocks(
    entries: pl.DataFrame, expected: pl.DataFrame, probes: pl.DataFrame
) -> pl.DataFrame:
    """Per case: concepts/labels/associations ``expected``/``matched``/value (§4.3, §4.4)."""
    counts = entries.group_by(["case_index", "kind"]).agg(
        pl.len().cast(pl.Int64).alias("expected"),
        pl.col("matched").sum().cast(pl.Int64).alias("matched"),
    )
    declared_associations = (
        expected.filter(pl.col("kind") == "association")
        .group_by("case_index")
        .agg(pl.len().cast(pl.Int64).alias("expected"))
    )
    covered = probes.group_by("case_index").agg(
        ((pl.col("query_outcome") == "queried") & (pl.col("query_total") >= 1))
        .sum()
        .cast(pl.Int64)
        .alias("matched"),
    )
    associations = (
        declared_associations.join(covered, on="case_index", how="left")
        .with_columns(pl.col("matched").fill_null(0), pl.lit("association").alias("kind"))
        .select("case_index", "kind", "expected", "matched")
    )
    blocks = pl.concat([counts.select(associations.columns), associations]).with_columns(
        (pl.col("matched") / pl.col("expected")).alias("value")
    )
    wide = None
    for kind, name in (
        ("concept", "concepts"),
        ("label", "labels"),
        ("association", "associations"),
    ):
        part = blocks.filter(pl.col("kind") == kind).select(
            "case_index",
            pl.col("expected").alias(f"coverage_{name}_expected"),
            pl.col("matched").alias(f"coverage_{name}_matched"),
            pl.col("value").alias(f"coverage_{name}"),
        )
        wide = part if wide is None else wide.join(part, on="case_index", how="full", coalesce=True)
    assert wide is not None
    return wide


def _citation_blocks(expected: pl.DataFrame, checks: pl.DataFrame) -> pl.DataFrame:
    """Per case declaring citations: recall (served) and validity, never merged (§4.5)."""
    declared = expected.filter(pl.col("kind") == "citation").select("case_index").unique()
    per_case = checks.group_by("case_index").agg(
        pl.len().cast(pl.Int64).alias("citations_expected_total"),
        pl.col("served").sum().cast(pl.Int64).alias("citations_matched"),
        citation_is_valid().sum().cast(pl.Int64).alias("citations_valid"),
    )
    return (
        declared.join(per_case, on="case_index", how="left")
        .with_columns(
            pl.col("citations_expected_total").fill_null(0),
            pl.col("citations_matched").fill_null(0),
            pl.col("citations_valid").fill_null(0),
        )
        .with_columns(
            (pl.col("citations_matched") / pl.col("citations_expected_total")).alias(
                "citations_recall"
            ),
            (pl.col("citations_valid") / pl.col("citations_expected_total")).alias(
                "citations_locator_validity"
            ),
        )
    )


def _association_why() -> pl.Expr:
    """The §4.7 reason an association probe is not covered."""
    errored_positions = pl.concat_list(
        [
            pl.when(pl.col(f"{position}_outcome") == "errored").then(
                pl.format("{}: {}", pl.lit(position), pl.col(f"{position}_message"))
            )
            for position in POSITIONS
        ]
    ).list.drop_nulls()
    any_errored = pl.any_horizontal(
        [pl.col(f"{position}_outcome") == "errored" for position in POSITIONS]
    )
    return (
        pl.when((pl.col("query_outcome") == "queried") & (pl.col("query_total") == 0))
        .then(pl.lit("query returned no association"))
        .when(pl.col("query_outcome") == "errored")
        .then(pl.lit("query errored"))
        .when(pl.col("query_outcome").is_null() & any_errored)
        .then(
            pl.lit("a position could not be resolved due to a transport error: ")
            + errored_positions.list.join("; ")
        )
        .otherwise(pl.lit("query never ran (a position did not pin)"))
    )


_MISSED_COLUMNS = ["case_index", "group", "item", "sub", "text"]


def _missed_rows(
    items: pl.DataFrame, entries: pl.DataFrame, probes: pl.DataFrame, checks: pl.DataFrame
) -> pl.DataFrame:
    """Every missed[] entry of every case, with its §4.7 ordering keys."""

    def keyed(frame: pl.DataFrame, group: int, item: str, sub: int, text: pl.Expr) -> pl.DataFrame:
        return frame.select(
            pl.col("case_index"),
            pl.lit(group, dtype=pl.Int32).alias("group"),
            pl.col(item).cast(pl.Int32).alias("item"),
            pl.lit(sub, dtype=pl.Int32).alias("sub"),
            text.alias("text"),
        )

    sources = keyed(
        items.filter(pl.col("first_rank").is_null()),
        1,
        "entry_index",
        0,
        pl.format("expected_sources: '{}' not found among passage hits", pl.col("source")),
    )
    unmatched = entries.filter(~pl.col("matched"))
    concepts = keyed(
        unmatched.filter(pl.col("kind") == "concept"),
        2,
        "entry_index",
        0,
        pl.format("expected_concepts: '{}' not resolved", pl.col("text")),
    )
    labels = keyed(
        unmatched.filter(pl.col("kind") == "label"),
        3,
        "entry_index",
        0,
        pl.format("expected_labels: '{}' not resolved", pl.col("text")),
    )
    associations = keyed(
        probes.filter(
            ~((pl.col("query_outcome") == "queried") & (pl.col("query_total") >= 1)).fill_null(
                False
            )
        ),
        4,
        "association_index",
        0,
        pl.format(
            "expected_associations: ({}, {}, {}) ",
            pl.col("subject_cue"),
            pl.col("label_cue"),
            pl.col("object_cue"),
        )
        + _association_why(),
    )
    locator = pl.format("expected_citations: ({}, {}) ", pl.col("source"), pl.col("paragraph"))
    unserved = keyed(
        checks.filter(~pl.col("served")),
        5,
        "citation_index",
        0,
        locator + pl.lit("not found among served results"),
    )
    invalid = keyed(
        checks.filter(~citation_is_valid()),
        5,
        "citation_index",
        1,
        locator + pl.lit("failed locator validity"),
    )
    return pl.concat([sources, concepts, labels, associations, unserved, invalid])


def _missed_lists(rows: pl.DataFrame) -> pl.DataFrame:
    return (
        rows.sort(["case_index", "group", "item", "sub"])
        .group_by("case_index", maintain_order=True)
        .agg(pl.col("text").alias("all_missed"))
        .select(
            "case_index",
            pl.col("all_missed").list.head(MISSED_CAP).alias("missed"),
            (pl.col("all_missed").list.len().cast(pl.Int64) - MISSED_CAP)
            .clip(lower_bound=0)
            .alias("missed_truncated"),
        )
    )


def _searched(tables: RunTables) -> pl.DataFrame:
    return tables.case_lanes.filter(pl.col("passage_outcome") == "searched").select("case_index")


def recall_scores(eval_set: HasExpected, tables: RunTables) -> pl.DataFrame:
    """The §4.2 recall block of every case that has one (the columns ``score_cases`` uses).

    One row per searched case with at least one judged expectation:
    ``case_index``, ``recall_expected_total``, ``recall_matched``,
    ``recall_at_k``, ``mrr``, ``ndcg``.
    """
    return _recall_blocks(_judged_items(_expected(eval_set), _searched(tables), tables.hits))


def score_cases(eval_set: HasExpected, tables: RunTables) -> pl.DataFrame:
    """The per-case frame (schema ``tables.CASES``), one row per case in case order."""
    expected = _expected(eval_set)
    lanes = tables.case_lanes
    searched = _searched(tables)

    items = _judged_items(expected, searched, tables.hits)
    recall = _recall_blocks(items)
    entries = _entry_matches(expected, tables.resolutions)
    coverage = _coverage_blocks(entries, expected, tables.probes)
    citations = _citation_blocks(expected, tables.citation_checks)
    missed = _missed_lists(_missed_rows(items, entries, tables.probes, tables.citation_checks))
    diversity = searched.join(
        tables.hits.select("case_index", "source")
        .unique()
        .group_by("case_index")
        .agg(pl.len().cast(pl.Int64).alias("diversity_sources")),
        on="case_index",
        how="left",
    ).with_columns(pl.col("diversity_sources").fill_null(0))

    declares = expected.group_by("case_index").agg(
        ((pl.col("kind") == "source") & (pl.col("relevance") >= 1)).any().alias("declares_source"),
        pl.col("kind")
        .is_in(["concept", "label", "association"])
        .any()
        .alias("declares_structural"),
    )

    frame = (
        lanes.select(
            "run_id",
            "case_index",
            "case_id",
            "passage_outcome",
            "passage_latency_ms",
            "structural_ran",
            "evidence_latency_ms",
            "budget_items_used",
            "budget_bytes_used",
            "budget_tokens_used",
            "budget_omitted_total",
        )
        .join(declares, on="case_index", how="left")
        .join(recall, on="case_index", how="left")
        .join(coverage, on="case_index", how="left")
        .join(citations, on="case_index", how="left")
        .join(missed, on="case_index", how="left")
        .join(diversity, on="case_index", how="left")
        .sort("case_index")
    )
    cross = (
        pl.col("declares_source").fill_null(False)
        & pl.col("declares_structural").fill_null(False)
        & (pl.col("passage_outcome") == "searched")
    )
    structural_hit = pl.any_horizontal(
        [
            pl.col(f"coverage_{name}_matched").fill_null(0) > 0
            for name in ("concepts", "labels", "associations")
        ]
    )
    frame = frame.with_columns(
        pl.when(cross).then(structural_hit).alias("lane_cross_structural_hit"),
        pl.when(cross)
        .then(pl.col("recall_matched").fill_null(0) > 0)
        .alias("lane_cross_passage_hit"),
        pl.col("missed").fill_null(pl.lit([], dtype=pl.List(pl.String))),
        pl.col("missed_truncated").fill_null(0),
    )
    return conform(frame, CASES)


# ---------------------------------------------------------------------------
# Aggregation (§5.2)
# ---------------------------------------------------------------------------


def _samples(metric: str, frame: pl.DataFrame, column: str) -> pl.DataFrame:
    return frame.select(
        pl.lit(metric).alias("metric"), pl.col(column).cast(pl.Float64).alias("sample")
    )


def aggregate(
    cases: pl.DataFrame, tables: RunTables, *, rerank_requested: bool = False
) -> dict[str, dict[str, Any]]:
    """The 31 aggregate metrics (keys ascending), from the per-case frame and the tables."""
    cue_latencies = tables.resolutions.unique(["case_index", "cue_index"], keep="first")
    probes = tables.probes
    checks = tables.citation_checks
    position_latencies = pl.concat(
        [
            probes.select(pl.col(f"{position}_latency_ms").alias("latency_ms"))
            for position in POSITIONS
        ]
    )
    samples = pl.concat(
        [
            _samples("latency.passage_ms", cases, "passage_latency_ms"),
            _samples("latency.resolve_ms", cue_latencies, "latency_ms"),
            _samples("latency.resolve_ms", position_latencies, "latency_ms"),
            _samples(
                "latency.query_ms",
                probes.filter(pl.col("query_outcome").is_not_null()),
                "query_latency_ms",
            ),
            _samples("recall.recall_at_k", cases, "recall_at_k"),
            _samples("recall.mrr", cases, "mrr"),
            _samples("recall.ndcg", cases, "ndcg"),
            _samples("coverage.concepts", cases, "coverage_concepts"),
            _samples("coverage.labels", cases, "coverage_labels"),
            _samples("coverage.associations", cases, "coverage_associations"),
            _samples("citations.recall", cases, "citations_recall"),
            _samples("citations.locator_validity", cases, "citations_locator_validity"),
            _samples("latency.citation_ms", checks, "latency_ms"),
            _samples("diversity.sources", cases, "diversity_sources"),
            _samples("latency.evidence_ms", cases, "evidence_latency_ms"),
            _samples("budget.items_used", cases, "budget_items_used"),
            _samples("budget.bytes_used", cases, "budget_bytes_used"),
            _samples("budget.tokens_used", cases, "budget_tokens_used"),
        ]
    ).filter(pl.col("sample").is_not_null())
    distributions = {
        row["metric"]: {key: row[key] for key in DISTRIBUTION_KEYS}
        for row in distribution_frame(samples, "sample", ["metric"]).iter_rows(named=True)
    }

    def count(frame: pl.DataFrame, predicate: pl.Expr) -> int:
        return int(frame.select(predicate.fill_null(False).sum()).item())

    lane_cross = cases.filter(pl.col("lane_cross_structural_hit").is_not_null())
    structural_hit = pl.col("lane_cross_structural_hit")
    passage_hit = pl.col("lane_cross_passage_hit")
    resolved = pl.col("outcome") == "resolved"
    unresolved = pl.col("outcome") == "unresolved"
    code = pl.col("code")
    section_declared = resolved & pl.col("section_check").is_in(["matched", "mismatched"])
    quote_declared = resolved & pl.col("quote_declared").is_not_null()
    lanes = tables.case_lanes
    budgeted = lanes.filter(pl.col("budget_items_used").is_not_null())
    budget_numerator = int(
        budgeted.select(pl.col("budget_omitted_by_budget").fill_null(0).sum()).item()
    )
    budget_denominator = int(
        budgeted.select((pl.col("budget_omitted_total") + pl.col("budget_items_used")).sum()).item()
    )
    rerank_population = (
        lanes.filter(
            (pl.col("evidence_outcome") == "assembled")
            & (pl.col("reranker_reason").fill_null("") != "empty_pool")
        )
        if rerank_requested
        else lanes.clear()
    )
    ratios = {
        "passage.failure_rate": ratio(
            count(cases, pl.col("passage_outcome") == "failed"), cases.height
        ),
        "structural.case_rate": ratio(count(cases, pl.col("structural_ran")), cases.height),
        "citations.resolved": ratio(count(checks, resolved), checks.height),
        "citations.no_source": ratio(
            count(checks, unresolved & (code == "no_source")), checks.height
        ),
        "citations.no_paragraph": ratio(
            count(checks, unresolved & (code == "no_paragraph")), checks.height
        ),
        "citations.other": ratio(
            count(
                checks,
                unresolved & (code.is_null() | ~code.is_in(["no_source", "no_paragraph"])),
            ),
            checks.height,
        ),
        "citations.section_match": ratio(
            count(checks, section_declared & (pl.col("section_check") == "matched")),
            count(checks, section_declared),
        ),
        "citations.quote_match": ratio(
            count(checks, quote_declared & pl.col("quote_matched")), count(checks, quote_declared)
        ),
        "lanes.structural_hit": ratio(count(lane_cross, structural_hit), lane_cross.height),
        "lanes.passage_hit": ratio(count(lane_cross, passage_hit), lane_cross.height),
        "lanes.both": ratio(count(lane_cross, structural_hit & passage_hit), lane_cross.height),
        "lanes.neither": ratio(
            count(lane_cross, ~structural_hit & ~passage_hit), lane_cross.height
        ),
        "budget.omitted_rate": ratio(budget_numerator, budget_denominator),
        "rerank.ran": ratio(
            count(rerank_population, pl.col("reranker_ran")), rerank_population.height
        ),
    }
    empty = {key: None for key in DISTRIBUTION_KEYS} | {"n": 0}
    metrics: dict[str, dict[str, Any]] = {}
    for name, statistic in sorted(catalog.statistics().items()):
        if statistic == "distribution":
            metrics[name] = dict(distributions.get(name, empty))
        elif name in ratios:
            metrics[name] = dict(ratios[name])
        else:
            raise KeyError(f"no aggregation for catalog metric {name!r}")
    unknown = (set(distributions) | set(ratios)) - set(metrics)
    if unknown:
        raise KeyError(f"aggregated metrics missing from the catalog: {sorted(unknown)}")
    return metrics


def metrics_frame(
    metrics: Mapping[str, Mapping[str, Any]],
    run_id: str,
    statistics: Mapping[str, str] | None = None,
) -> pl.DataFrame:
    """The ``metrics`` table: one row per aggregate metric.

    A metric's shape comes from ``statistics`` (e.g. an artifact's own
    ``definitions``) or the catalog — never from the value's keys.
    """
    known: dict[str, str] = {**catalog.statistics(), **(statistics or {})}
    rows = [
        {"run_id": run_id, "metric": name, "statistic": known.get(name), **value}
        for name, value in metrics.items()
    ]
    if not rows:
        return pl.DataFrame(schema=METRICS)
    return conform(pl.from_dicts(rows, infer_schema_length=None), METRICS)


def score_run(
    eval_set: HasExpected, tables: RunTables, *, rerank_requested: bool = False
) -> Scores:
    """Score a run: the per-case frame plus every aggregate metric of the catalog."""
    cases = score_cases(eval_set, tables)
    metrics = aggregate(cases, tables, rerank_requested=rerank_requested)
    return Scores(cases=cases, metrics=metrics, metrics_frame=metrics_frame(metrics, tables.run_id))


def lane_cross_line(metrics: dict[str, dict[str, Any]]) -> str | None:
    """The §3.9 cross-tab console line, or None when no case is in the population."""
    both = metrics["lanes.both"]
    if not both["n"]:
        return None
    neither = metrics["lanes.neither"]["numerator"]
    return (
        f"  lane cross-tab over {both['n']} case(s) declaring both a structural and a source "
        f"expectation (passage lane completed): {both['numerator']} both, {neither} neither"
    )

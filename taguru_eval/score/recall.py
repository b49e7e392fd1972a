"""recall@k, MRR and nDCG per case (EVALUATE.md §4.2–§4.4), from the matched items.

Sums whose last bit matters (DCG, IDCG) are sequential left-to-right folds
in a fixed order, and ``log2`` comes from the C library (Polars' ``log(2)``
divides natural logs and differs in the last bit for about a third of the
integers)."""

from __future__ import annotations

import math

import polars as pl

from taguru_eval.score.match import FAST, Strategy, _in_case_order
from taguru_eval.score.stats import (
    grouped_sequential_sum,
    position_in_group,
)
from taguru_eval.tables.schemas import RunTables


def _log2_of_position_plus_two(positions: pl.Expr, largest: int) -> pl.Expr:
    """``log2(position + 2)`` from the C library for positions ``0..=largest``; null stays null."""
    table = pl.Series([math.log2(position + 2) for position in range(max(largest, 0) + 1)])
    return pl.lit(table, dtype=pl.Float64).gather(positions)


"""Up to this many judged items per case, DCG/IDCG fold as list expressions (one pass)."""


def _fold_left(lists: pl.Expr, lengths: pl.Expr, longest: int) -> pl.Expr:
    """Left-to-right IEEE sum from 0.0 of each list's elements (``longest`` = max length)."""
    total = pl.lit(0.0, dtype=pl.Float64)
    for position in range(longest):
        element = lists.list.get(position, null_on_oob=True)
        total = pl.when(lengths > position).then(total + element).otherwise(total)
    return total


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


def _recall_blocks_by_slots(gains: pl.DataFrame, max_items: int) -> pl.DataFrame | None:
    """Per-case recall columns from each case's items spread over ``width`` slot columns.

    ``gains`` is in case order. Slot ``e`` of a case is its ``e``-th item
    (declaration order), null past its last item; every per-case value is then
    a few column-wide operations on as many rows as cases, with no group-by
    or sort. None when a case has more than ``max_items`` items.
    """
    if gains.height == 0:
        return None
    runs = gains.get_column("case_index").rle().struct.unnest()
    shortest, width = runs.select(pl.col("len").min(), pl.col("len").max().alias("longest")).row(0)
    top_relevance = int(gains.select(pl.col("relevance").max()).item() or 0)
    if width > max_items or top_relevance > _SLOT_MAX_RELEVANCE:
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
    # which changes nothing; divisions are column by column (see recall_blocks).
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
        # taguru sums the matched gains from -0.0 (Rust's f64 ``Sum``), so a case
        # that matched nothing has nDCG -0.0; written as taguru writes it (ERRATA
        # row 25). Any match makes DCG positive, so the sign changes nothing else.
        pl.when(pl.col("recall_matched") == 0)
        .then(pl.lit(-0.0))
        .otherwise(pl.min_horizontal(pl.col("dcg") / pl.col("idcg"), pl.lit(1.0)))
        .alias("ndcg"),
    ).collect()


def recall_blocks(items: pl.DataFrame, strategy: Strategy = FAST) -> pl.DataFrame:
    """recall@k, MRR and graded nDCG per case (EVALUATE.md §4.2), in case order."""
    gains = _in_case_order(items, pl.col("entry_index"))
    by_slots = _recall_blocks_by_slots(gains, strategy.slot_max_items)
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
    if longest <= strategy.fold_max_items:
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


def searched_cases(tables: RunTables) -> pl.DataFrame:
    """The ``case_index`` of every case whose passage lane searched (the cases §4.2 scores)."""
    return tables.case_lanes.filter(pl.col("passage_outcome") == "searched").select("case_index")

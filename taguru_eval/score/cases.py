"""The per-case frame: every per-case metric of one run as a column of ``cases``."""

from __future__ import annotations

import polars as pl

from taguru_eval.score.blocks import (
    _citation_blocks,
    _coverage_blocks,
    _entry_matches,
    _missed_lists,
    _missed_rows,
)
from taguru_eval.score.match import FAST, HasExpected, Strategy, judged_items
from taguru_eval.score.recall import recall_blocks, searched_cases
from taguru_eval.tables.schemas import CASES, RunTables, conform


def score_cases(
    eval_set: HasExpected, tables: RunTables, strategy: Strategy = FAST
) -> pl.DataFrame:
    """The per-case frame (schema ``tables.CASES``), one row per case in case order.

    ``strategy`` picks the matching engine (:class:`~taguru_eval.score.match.Strategy`);
    the result does not depend on it.
    """
    expected = eval_set.expected
    lanes = tables.case_lanes
    searched = searched_cases(tables)

    items = judged_items(expected, searched, tables.hits, strategy)
    recall = recall_blocks(items, strategy)
    entries = _entry_matches(expected, tables.resolutions)
    coverage = _coverage_blocks(entries, expected, tables.probes)
    citations = _citation_blocks(expected, tables.citation_checks)
    missed = _missed_lists(_missed_rows(items, entries, tables.probes, tables.citation_checks))
    # Distinct sources per case, counted per group: a unique() over every hit
    # row first would copy the whole hits table (240 MiB at 100,000 cases).
    diversity = searched.join(
        tables.hits.group_by("case_index").agg(
            pl.col("source").n_unique().cast(pl.Int64).alias("diversity_sources")
        ),
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

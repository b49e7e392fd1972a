"""Benchmark what --must-refuse adds to scoring: verdicts, answerability and 15 metrics.

Builds N synthetic eval cases (default 100,000) x 10 served hits, every case
declaring one relevant source, plus M must-refuse cases (default 1,000) x 10
probe hits and two cue probes each, all straight into the run's tables (no
server: the network phase is not what is measured). Then scores the same
tables with :func:`taguru_eval.score.aggregate.score_run` twice, side by side
in one process — without ``refusal_rule`` (a plain run) and with ``semantic``
(verdicts for both populations, the membership frame, the abstention and
answerability metrics) — and prints the median of REPEATS timed calls of each,
and their ratio. Building the tables is not timed.

    .venv/bin/python benchmarks/must_refuse.py [--cases N] [--must-refuse M] [--repeats R]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import polars as pl  # noqa: E402

from taguru_eval.score.aggregate import score_run  # noqa: E402
from taguru_eval.tables.schemas import EXPECTED, RunTables, conform  # noqa: E402

HITS = 10
CUES = 2


def _plan(frame: pl.DataFrame) -> pl.DataFrame:
    return frame.with_columns(
        pl.lit("searched").alias("passage_outcome"),
        pl.lit(5, dtype=pl.Int64).alias("passage_latency_ms"),
        pl.lit(HITS, dtype=pl.Int64).alias("hit_count"),
        pl.lit("bench").alias("plan_context"),
        pl.lit(True).alias("plan_bm25_ran"),
        pl.lit(True).alias("plan_vector_ran"),
        pl.lit(0.35, dtype=pl.Float32).alias("plan_vector_floor"),
        pl.lit(10, dtype=pl.Int64).alias("limit"),
    )


def build(cases: int, refusals: int) -> tuple[Any, RunTables]:
    """(eval-set-like object with ``expected``, the run's tables) for N + M cases."""

    def hits(count: int, population: str) -> pl.DataFrame:
        frame = pl.DataFrame({"i": pl.int_range(count * HITS, eager=True)})
        return frame.select(
            pl.lit("bench").alias("run_id"),
            (pl.col("i") // HITS).cast(pl.Int32).alias("case_index"),
            pl.format("{}-{}", pl.lit(population), pl.col("i") // HITS).alias("case_id"),
            (pl.col("i") % HITS).cast(pl.Int32).alias("rank"),
            pl.format(
                "corpus/doc{}.md", (pl.col("i") // HITS * 7 + pl.col("i") % HITS) % 5000
            ).alias("source"),
            (pl.col("i") % HITS % 4).cast(pl.Int64).alias("paragraph"),
            pl.when((pl.col("i") // HITS) % 3 == 0)
            .then(None)
            .otherwise(pl.col("i") % HITS + 1)
            .cast(pl.Int32)
            .alias("vector_rank"),
            pl.lit(population).alias("population"),
        )

    def lanes(count: int, population: str) -> pl.DataFrame:
        frame = pl.DataFrame({"case_index": pl.int_range(count, eager=True, dtype=pl.Int32)})
        return _plan(
            frame.with_columns(
                pl.lit("bench").alias("run_id"),
                pl.format("{}-{}", pl.lit(population), pl.col("case_index")).alias("case_id"),
            )
        )

    def calls(count: int, population: str) -> pl.DataFrame:
        return lanes(count, population).select(
            "run_id",
            "case_index",
            "case_id",
            pl.lit("passage").alias("lane"),
            pl.lit(200, dtype=pl.Int32).alias("http_status"),
            pl.lit(population).alias("population"),
        )

    cue = pl.DataFrame({"i": pl.int_range(refusals * CUES, eager=True)}).select(
        pl.lit("bench").alias("run_id"),
        (pl.col("i") // CUES).cast(pl.Int32).alias("case_index"),
        pl.format("must_refuse-{}", pl.col("i") // CUES).alias("case_id"),
        (pl.col("i") % CUES).cast(pl.Int32).alias("cue_index"),
        pl.when(pl.col("i") % 5 == 0).then(pl.lit("Name")).alias("name"),
        pl.lit("must_refuse").alias("population"),
    )
    refusal_lanes = lanes(refusals, "must_refuse").with_columns(
        pl.lit("out_of_corpus").alias("kind"), pl.lit(True).alias("structural_ran")
    )
    tables = RunTables.from_frames(
        "bench",
        {
            "case_lanes": lanes(cases, "eval"),
            "hits": pl.concat([hits(cases, "eval"), hits(refusals, "must_refuse")]),
            "calls": pl.concat([calls(cases, "eval"), calls(refusals, "must_refuse")]),
            "resolutions": cue,
            "refusal_lanes": refusal_lanes,
        },
    )
    expected = pl.DataFrame({"case_index": pl.int_range(cases, eager=True, dtype=pl.Int32)}).select(
        pl.format("eval-{}", pl.col("case_index")).alias("case_id"),
        "case_index",
        pl.lit("source").alias("kind"),
        pl.lit(0, dtype=pl.Int32).alias("entry_index"),
        pl.lit(0, dtype=pl.Int32).alias("item_index"),
        pl.format("corpus/doc{}.md", (pl.col("case_index") * 7 + 2) % 5000).alias("source"),
        pl.lit(None, dtype=pl.Int64).alias("paragraph"),
        pl.lit(1, dtype=pl.Int64).alias("relevance"),
    )
    return SimpleNamespace(expected=conform(expected, EXPECTED)), tables


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=100_000)
    parser.add_argument("--must-refuse", type=int, default=1_000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    eval_set, tables = build(args.cases, args.must_refuse)
    timings: dict[str, list[float]] = {"plain": [], "must-refuse": []}
    scores = {}
    for _ in range(args.repeats):
        for label, rule in (("plain", None), ("must-refuse", "semantic")):
            start = time.perf_counter()
            scores[label] = score_run(eval_set, tables, refusal_rule=rule)  # type: ignore[arg-type]
            timings[label].append(time.perf_counter() - start)
    plain = statistics.median(timings["plain"])
    flagged = statistics.median(timings["must-refuse"])
    metrics = scores["must-refuse"].metrics
    print(
        f"score_run over {args.cases:,} eval cases x {HITS} hits, "
        f"{args.must_refuse:,} must-refuse cases x {HITS} hits + {CUES} cues, "
        f"median of {args.repeats}"
    )
    print(f"  plain run (31 metrics)             {plain:8.3f} s")
    print(f"  --must-refuse (46 metrics)         {flagged:8.3f} s")
    print(f"  ratio (must-refuse / plain)        {flagged / plain:8.2f}x")
    print(
        "  check: answerability.false_refusal_rate "
        f"{metrics['answerability.false_refusal_rate']['numerator']}/"
        f"{metrics['answerability.false_refusal_rate']['n']}, abstention.refusal_rate "
        f"{metrics['abstention.refusal_rate']['numerator']}/{metrics['abstention.refusal_rate']['n']}"
    )


if __name__ == "__main__":
    main()

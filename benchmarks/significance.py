"""Benchmark compare's paired significance: 10,000 resamples over 100,000 cases.

Two synthetic comparisons of ``--cases`` matched cases are built as
:attr:`Comparison.cases` frames (``classify_cases`` over per-side frames):

* **realistic**: the nine compared metrics computed per case from simulated
  rankings (rank of the first relevant hit, 1–4 expected sources, graded
  nDCG, coverage and citation shares, distinct sources); HEAD re-ranks 20% of
  the cases, so most pairs are unchanged and the changed ones take the values
  such per-case metrics take;
* **worst case**: one metric whose differences are all distinct (continuous
  noise on every case), where no grouping helps.

Each is tested with :func:`taguru_eval.compare.significance.significance`
(bootstrap interval + sign-flip p-value, ``--resamples`` each) ``REPEATS``
times; the median seconds are printed. Side by side, one metric of the worst
case is run through the textbook procedures in plain NumPy (an index matrix
for the bootstrap, a sign matrix for the randomization test), and the ratio is
printed.

    .venv/bin/python benchmarks/significance.py [--cases N] [--resamples N]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import polars as pl

from taguru_eval.catalog import COMPARISON_METRICS
from taguru_eval.compare.classify import classify_cases
from taguru_eval.compare.significance import PairedCases, significance

REPEATS = 3
TARGET_S = 10.0
"""Issue 14: "10,000 resamples over 100,000 cases in seconds" (all nine metrics)."""


def _side(rng: np.random.Generator, first_rank: np.ndarray[Any, Any]) -> dict[str, Any]:
    n = len(first_rank)
    found = first_rank <= 10
    expected = rng.integers(1, 5, n)
    matched = np.where(found, rng.integers(1, 5, n) % (expected + 1), 0)
    matched = np.maximum(matched, found.astype(np.int64))
    grade = rng.integers(1, 4, n)
    ideal = (2.0**grade - 1) / np.log2(2)
    ndcg = np.where(found, ((2.0**grade - 1) / np.log2(first_rank + 1)) / ideal, 0.0)
    return {
        "recall.recall_at_k": matched / expected,
        "recall.mrr": np.where(found, 1.0 / first_rank, 0.0),
        "recall.ndcg": np.minimum(ndcg, 1.0),
        "coverage.concepts": rng.integers(0, 3, n) / 2,
        "coverage.labels": rng.integers(0, 2, n) / 1,
        "coverage.associations": rng.integers(0, 4, n) / 3,
        "citations.recall": rng.integers(0, 3, n) / 2,
        "citations.locator_validity": rng.integers(0, 3, n) / 2,
        "diversity.sources": rng.integers(1, 8, n).astype(np.float64),
    }


def realistic(cases: int) -> pl.DataFrame:
    """Both sides of a comparison where HEAD re-ranked 20% of the cases."""
    rng = np.random.default_rng(20261130)
    ids = [f"case-{index:06d}" for index in range(cases)]
    first_rank = rng.geometric(0.35, cases)
    base = _side(np.random.default_rng(1), first_rank)
    moved = rng.random(cases) < 0.2
    head_rank = np.where(moved, np.maximum(1, first_rank + rng.integers(-2, 4, cases)), first_rank)
    head = _side(np.random.default_rng(1), head_rank)
    for metric in ("coverage.concepts", "citations.recall"):
        head[metric] = np.where(
            moved, np.random.default_rng(2).integers(0, 3, cases) / 2, base[metric]
        )
    for metric in ("coverage.labels", "coverage.associations", "citations.locator_validity"):
        head[metric] = base[metric]
    head["diversity.sources"] = np.where(
        moved, np.maximum(1, base["diversity.sources"] - 1), base["diversity.sources"]
    )
    return classify_cases(
        pl.DataFrame({"case_id": ids, **base}), pl.DataFrame({"case_id": ids, **head})
    )


def worst_case(cases: int) -> pl.DataFrame:
    """One metric, every difference distinct."""
    rng = np.random.default_rng(7)
    ids = [f"case-{index:06d}" for index in range(cases)]
    base = rng.random(cases)
    head = base + rng.normal(-0.002, 0.2, cases)
    return classify_cases(
        pl.DataFrame({"case_id": ids, "recall.ndcg": base}),
        pl.DataFrame({"case_id": ids, "recall.ndcg": head}),
    )


def textbook(deltas: np.ndarray[Any, Any], resamples: int) -> tuple[float, float, float]:
    """The same two procedures, one draw per pair, in plain NumPy batches."""
    rng = np.random.default_rng(0)
    n = len(deltas)
    batch = max(1, (1 << 22) // n)
    means, flips = [], []
    for start in range(0, resamples, batch):
        size = min(batch, resamples - start)
        means.append(deltas[rng.integers(0, n, size=(size, n), dtype=np.int32)].mean(axis=1))
        signs = rng.integers(0, 2, size=(size, n), dtype=np.int8) * 2 - 1
        flips.append(np.abs(signs @ deltas) / n)
    low, high = np.quantile(np.concatenate(means), [0.025, 0.975])
    p_value = (1 + np.count_nonzero(np.concatenate(flips) >= abs(deltas.mean()))) / (resamples + 1)
    return float(low), float(high), float(p_value)


def median_seconds(work: Callable[[], object]) -> float:
    times = []
    for _ in range(REPEATS):
        start = time.perf_counter()
        work()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=100_000)
    parser.add_argument("--resamples", type=int, default=10_000)
    args = parser.parse_args()

    frame = realistic(args.cases)
    distinct = {
        metric: frame.get_column(f"{metric}.delta").n_unique() for metric in COMPARISON_METRICS
    }
    paired = PairedCases(frame, COMPARISON_METRICS)
    result = significance(paired, resamples=args.resamples)
    realistic_s = median_seconds(lambda: significance(paired, resamples=args.resamples))
    print(f"realistic: {args.cases:,} cases x 9 metrics, {args.resamples:,} resamples each")
    print(f"  distinct differences per metric: {distinct}")
    print(f"  median {realistic_s:.2f} s for all nine metrics (target <= {TARGET_S:.0f} s)")
    for row in result.frame.iter_rows(named=True):
        print(
            f"    {row['metric']}: delta {row['mean_delta']:+.5f} "
            f"CI [{row['ci_low']:+.5f}, {row['ci_high']:+.5f}] p {row['p_value']:.4f} "
            f"{row['verdict']}"
        )

    worst = worst_case(args.cases)
    worst_paired = PairedCases(worst, ("recall.ndcg",))
    ours = significance(worst_paired, resamples=args.resamples)
    worst_s = median_seconds(lambda: significance(worst_paired, resamples=args.resamples))
    deltas = worst.get_column("recall.ndcg.delta").to_numpy()
    start = time.perf_counter()
    low, high, p_value = textbook(deltas, args.resamples)
    textbook_s = time.perf_counter() - start
    mine = ours.frame.row(0, named=True)
    print(f"worst case: one metric, {args.cases:,} distinct differences")
    print(
        f"  ours median {worst_s:.2f} s: CI [{mine['ci_low']:+.5f}, {mine['ci_high']:+.5f}] "
        f"p {mine['p_value']:.4f}"
    )
    print(
        f"  textbook NumPy (one run) {textbook_s:.2f} s: CI [{low:+.5f}, {high:+.5f}] "
        f"p {p_value:.4f}; ratio {textbook_s / worst_s:.1f}x"
    )


if __name__ == "__main__":
    main()

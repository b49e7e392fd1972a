"""Synthetic paired runs for calibrating compare's significance tests.

Each case has a latent ease ``q`` (Beta(2, 2)) and fixed label counts: 1-5
expected passages, 1-4 concepts, 1-2 labels, 1-3 associations, 1-3 expected
citations. One side of a run draws every metric of every case from them, so
the nine metrics are correlated through ``q`` and through the passage hits,
and take the values real per-case metrics take, ties and zeros included:

* recall@k = hits / expected, hits ~ Binomial(expected, q) (0 when none is found);
* MRR = 1 / rank of the first relevant hit (rank ~ Geometric(0.3 + 0.6 q)), 0 on
  a miss or past rank 10; nDCG from the same rank and recall;
* coverage and citation shares as binomial fractions; locator validity mostly 1;
  distinct sources 1 + Binomial(4, q).

Two A/A designs, both with no real change (BASE and HEAD exchangeable case by
case, so every paired test's null hypothesis holds):

* ``redraw`` — HEAD draws every case again from the same distribution;
* ``noise`` — HEAD keeps BASE's values except for a random quarter of the
  cases, drawn again (most differences are exactly 0, as in real compares).

A negative ``shift`` lowers HEAD's recall@k by that much on average: every
case with a hit loses one with the probability that makes the mean drop equal
to the shift.
The frames are :attr:`Comparison.cases`-shaped (``case_id``, ``in_base``,
``in_head``, ``<metric>.base/.head/.delta``), what
:func:`taguru_eval.compare.significance.significance` takes (as
:class:`~taguru_eval.compare.significance.PairedCases`).
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np
import polars as pl

from taguru_eval.catalog import COMPARISON_METRICS
from taguru_eval.compare.model import base_column, delta_column, head_column

Design = Literal["redraw", "noise"]
Array = np.ndarray[Any, Any]

RECALL = "recall.recall_at_k"
NOISE_SHARE = 0.25
"""The share of cases the ``noise`` design draws again."""


def _labels(rng: np.random.Generator, n: int) -> dict[str, Array]:
    return {
        "q": rng.beta(2.0, 2.0, n),
        "expected": rng.integers(1, 6, n),
        "concepts": rng.integers(1, 5, n),
        "labels": rng.integers(1, 3, n),
        "associations": rng.integers(1, 4, n),
        "citations": rng.integers(1, 4, n),
    }


def _side(rng: np.random.Generator, labels: dict[str, Array]) -> dict[str, Array]:
    q = labels["q"]
    n = len(q)
    hits = rng.binomial(labels["expected"], q)
    rank = rng.geometric(0.3 + 0.6 * q)
    found = (hits > 0) & (rank <= 10)
    recall = hits / labels["expected"]
    mrr = np.where(found, 1.0 / rank, 0.0)
    ndcg = np.where(found, np.minimum(1.0, recall * (1.0 + 1.0 / np.log2(rank + 1.0)) / 2.0), 0.0)
    return {
        RECALL: recall,
        "recall.mrr": mrr,
        "recall.ndcg": ndcg,
        "coverage.concepts": rng.binomial(labels["concepts"], q) / labels["concepts"],
        "coverage.labels": rng.binomial(labels["labels"], q) / labels["labels"],
        "coverage.associations": rng.binomial(labels["associations"], q) / labels["associations"],
        "citations.recall": rng.binomial(labels["citations"], q) / labels["citations"],
        "citations.locator_validity": rng.binomial(labels["citations"], 0.9) / labels["citations"],
        "diversity.sources": 1.0 + rng.binomial(4, q, n),
        "_hits": hits,
    }


def paired_runs(
    rng: np.random.Generator, n: int, design: Design = "redraw", shift: float = 0.0
) -> pl.DataFrame:
    """One synthetic comparison of ``n`` matched cases (see the module docstring)."""
    labels = _labels(rng, n)
    base = _side(rng, labels)
    if design == "redraw":
        head = _side(rng, labels)
    else:
        again = _side(rng, labels)
        moved = rng.random(n) < NOISE_SHARE
        head = {name: np.where(moved, again[name], base[name]) for name in base}
    if shift < 0.0:
        step = np.where(head["_hits"] > 0, 1.0 / labels["expected"], 0.0)
        chance = min(1.0, -shift * n / float(step.sum()))
        head[RECALL] = head[RECALL] - np.where(rng.random(n) < chance, step, 0.0)
    columns: dict[str, Array] = {}
    for metric in COMPARISON_METRICS:
        columns[base_column(metric)] = base[metric].astype(np.float64)
        columns[head_column(metric)] = head[metric].astype(np.float64)
        columns[delta_column(metric)] = columns[head_column(metric)] - columns[base_column(metric)]
    return pl.DataFrame(
        {
            "case_id": [f"case-{index:06d}" for index in range(n)],
            "in_base": np.ones(n, dtype=bool),
            "in_head": np.ones(n, dtype=bool),
            **columns,
        }
    )

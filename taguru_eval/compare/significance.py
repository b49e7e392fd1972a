"""Paired significance of a comparison: is a metric's move more than noise?

For every metric compare classifies cases by (:attr:`Comparison.compared`),
the matched cases with a value on both sides form pairs, and their
differences ``d = head - base`` are tested:

* the **mean paired difference** ``mean(d)``;
* a **paired bootstrap** confidence interval of it (percentile method at
  ``1 - alpha``): ``resamples`` times, ``n`` pairs are drawn with replacement
  and their mean difference taken;
* a two-sided **paired randomization (sign-flip) test**: under "no effect"
  each pair's difference is as likely to have either sign, so ``resamples``
  times every difference gets a random sign; the p-value is
  ``(1 + #{|mean*| >= |mean(d)|}) / (resamples + 1)``.

Both draw from NumPy generators seeded by ``(seed, metric name, test)``, so a
result is reproducible and does not depend on which other metrics are tested.

The work is vectorized over resamples and kept proportional to how varied the
differences are, not to the case count: pairs with equal differences are
interchangeable, so a difference value shared by many pairs ("heavy": most
often 0, an unchanged case) is drawn as one multinomial (bootstrap) or
binomial (sign flip) count per resample, and only the remaining, rarely
repeated values are drawn one by one in matrix batches. The draws are exactly
the textbook procedures; only their bookkeeping is grouped.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Final

import numpy as np
import numpy.typing as npt
import polars as pl

from taguru_eval.catalog import CATALOG, Catalog
from taguru_eval.compare.model import base_column, delta_column, head_column
from taguru_eval.compare.report import Comparison

DEFAULT_RESAMPLES: Final = 10_000
MAX_RESAMPLES: Final = 1_000_000
"""The most resamples a test draws: a p-value resolution of 1e-6, already finer than
any alpha a gate uses, at about 100 times the default's time and 8 MB of means per
metric; past it the bootstrap's one array of means would not fit in memory."""
DEFAULT_SEED: Final = 0
MAX_SEED: Final = 2**64 - 1
"""The largest ``--seed``: a u64, as every other integer in the files (the seed is
recorded in the changes.jsonl header, where a reader may hold it in 64 bits)."""
DEFAULT_ALPHA: Final = 0.05

SIGNIFICANT_REGRESSION: Final = "regressed"
SIGNIFICANT_IMPROVEMENT: Final = "improved"
NOT_SIGNIFICANT: Final = "no significant change"
NOT_TESTED: Final = "not tested"
"""Verdicts of one metric: a significant move either way, none, or no pair to test."""

HEAVY_MIN_PAIRS: Final = 32
"""A difference value shared by at least this many pairs is drawn as one count."""

HEAVY_MAX_VALUES: Final = 256
"""At most this many heavy values (the most frequent), to bound the count draws."""

BATCH_ELEMENTS: Final = 1 << 22
"""Random draws materialised at once (about 32 MiB of float64)."""

SIGNIFICANCE_SCHEMA: Final = {
    "metric": pl.String,
    "higher_is_better": pl.Boolean,
    "n": pl.Int64,
    "base_mean": pl.Float64,
    "head_mean": pl.Float64,
    "mean_delta": pl.Float64,
    "ci_low": pl.Float64,
    "ci_high": pl.Float64,
    "p_value": pl.Float64,
    "verdict": pl.String,
}
"""One row per tested metric."""

Floats = npt.NDArray[np.float64]
Ints = npt.NDArray[np.int64]


@dataclass(frozen=True)
class Significance:
    """The paired tests of one comparison, with the settings that produced them.

    ``frame`` has one row per compared metric (:data:`SIGNIFICANCE_SCHEMA`):
    ``n`` matched pairs, both sides' means over those pairs, ``mean_delta``
    (head - base), the bootstrap interval ``ci_low``/``ci_high`` at
    ``confidence``, the sign-flip ``p_value`` and the ``verdict`` at ``alpha``
    (a significant move in the metric's worse direction is ``regressed``).
    """

    frame: pl.DataFrame
    resamples: int
    seed: int
    alpha: float

    @property
    def confidence(self) -> float:
        """The interval's coverage: ``1 - alpha``."""
        return 1.0 - self.alpha

    def regressed(self) -> pl.DataFrame:
        """The metrics that regressed significantly (what ``--fail-on-regression`` gates on)."""
        return self.frame.filter(pl.col("verdict") == SIGNIFICANT_REGRESSION)

    def header_block(self) -> dict[str, object]:
        """The ``significance`` member added to the changes.jsonl header."""
        return {
            "method": {
                "interval": "paired bootstrap, percentile",
                "test": "paired randomization (sign flip), two-sided",
            },
            "resamples": self.resamples,
            "seed": self.seed,
            "alpha": self.alpha,
            "metrics": [
                {
                    "metric": row["metric"],
                    "n": row["n"],
                    "base_mean": _finite(row["base_mean"]),
                    "head_mean": _finite(row["head_mean"]),
                    "mean_delta": _finite(row["mean_delta"]),
                    "ci": [_finite(row["ci_low"]), _finite(row["ci_high"])],
                    "p_value": _finite(row["p_value"]),
                    "verdict": row["verdict"],
                }
                for row in self.frame.iter_rows(named=True)
            ],
        }

    def lines(self) -> list[str]:
        """The terminal lines printed after compare's summary."""
        percent = f"{self.confidence * 100:g}%"
        lines = [
            f"  significance (paired; {self.resamples} resamples, seed {self.seed}, "
            f"alpha {self.alpha:g}):"
        ]
        untested = []
        for row in self.frame.iter_rows(named=True):
            if row["n"] == 0:
                untested.append(row["metric"])
                continue
            lines.append(
                f"    {row['metric']}: Δ {row['mean_delta']:+.4f} over {row['n']} pair(s), "
                f"{percent} CI [{row['ci_low']:+.4f}, {row['ci_high']:+.4f}], "
                f"p {row['p_value']:.4f} — {row['verdict']}"
            )
        if untested:
            lines.append(f"    {NOT_TESTED} (no matched pair): {', '.join(untested)}")
        return lines


def significance(
    comparison: Comparison,
    *,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
    alpha: float = DEFAULT_ALPHA,
    catalog: Catalog = CATALOG,
) -> Significance:
    """Paired bootstrap intervals and sign-flip p-values for every compared metric.

    A metric's direction (which sign is a regression) is the catalog's
    ``higher_is_better``; a metric without one is never called regressed or
    improved. ``ValueError`` for ``resamples`` outside 1..=:data:`MAX_RESAMPLES`
    or ``alpha`` outside (0, 1).
    """
    return significance_of_cases(
        comparison.cases,
        comparison.compared,
        resamples=resamples,
        seed=seed,
        alpha=alpha,
        catalog=catalog,
    )


def significance_of_cases(
    cases: pl.DataFrame,
    compared: Sequence[str],
    *,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
    alpha: float = DEFAULT_ALPHA,
    catalog: Catalog = CATALOG,
) -> Significance:
    """:func:`significance` over a :attr:`Comparison.cases`-shaped frame
    (``in_base``, ``in_head`` and the ``<metric>.base/.head/.delta`` columns)."""
    if not 1 <= resamples <= MAX_RESAMPLES:
        raise ValueError(f"resamples must be a positive integer of at most {MAX_RESAMPLES}")
    if not 0.0 < alpha < 1.0:
        raise ValueError("alpha must be strictly between 0 and 1")
    paired = cases.filter(pl.col("in_base") & pl.col("in_head"))
    rows = []
    for metric in compared:
        definition = catalog.get(metric)
        higher_is_better = None if definition is None else definition.higher_is_better
        pairs = paired.select(
            pl.col(base_column(metric)), pl.col(head_column(metric)), pl.col(delta_column(metric))
        ).filter(pl.all_horizontal(pl.all().is_not_null() & pl.all().is_finite()))
        base = pairs.get_column(base_column(metric)).to_numpy()
        head = pairs.get_column(head_column(metric)).to_numpy()
        deltas = pairs.get_column(delta_column(metric)).to_numpy().astype(np.float64)
        rows.append(
            _test_metric(metric, higher_is_better, base, head, deltas, resamples, seed, alpha)
        )
    frame = pl.DataFrame(rows, schema=SIGNIFICANCE_SCHEMA, orient="row")
    return Significance(frame, resamples, seed, alpha)


def _test_metric(
    metric: str,
    higher_is_better: bool | None,
    base: Floats,
    head: Floats,
    deltas: Floats,
    resamples: int,
    seed: int,
    alpha: float,
) -> tuple[object, ...]:
    n = len(deltas)
    if n == 0:
        return (metric, higher_is_better, 0, None, None, None, None, None, None, NOT_TESTED)
    observed = float(deltas.mean())
    means = bootstrap_means(deltas, resamples, _generator(seed, metric, "bootstrap"))
    low, high = np.quantile(means, [alpha / 2.0, 1.0 - alpha / 2.0])
    p_value = sign_flip_p_value(deltas, resamples, _generator(seed, metric, "sign-flip"))
    return (
        metric,
        higher_is_better,
        n,
        float(base.mean()),
        float(head.mean()),
        observed,
        float(low),
        float(high),
        p_value,
        _verdict(observed, p_value, alpha, higher_is_better),
    )


def _verdict(observed: float, p_value: float, alpha: float, higher_is_better: bool | None) -> str:
    if p_value >= alpha or observed == 0.0 or higher_is_better is None:
        return NOT_SIGNIFICANT
    better = observed > 0.0 if higher_is_better else observed < 0.0
    return SIGNIFICANT_IMPROVEMENT if better else SIGNIFICANT_REGRESSION


def _generator(seed: int, metric: str, test: str) -> np.random.Generator:
    """One stream per (seed, metric, test): results never depend on the other metrics."""
    return np.random.default_rng(
        [seed, zlib.crc32(metric.encode("utf-8")), zlib.crc32(test.encode("utf-8"))]
    )


@dataclass(frozen=True)
class _Split:
    """Difference values split into heavy ones (value, pair count) and the rest, one per pair."""

    heavy_values: Floats
    heavy_counts: Ints
    light: Floats


def _split(values: Floats) -> _Split:
    distinct, counts = np.unique(values, return_counts=True)
    order = np.argsort(-counts, kind="stable")[:HEAVY_MAX_VALUES]
    heavy = order[counts[order] >= HEAVY_MIN_PAIRS]
    light = np.ones(len(distinct), dtype=bool)
    light[heavy] = False
    return _Split(
        heavy_values=distinct[heavy].astype(np.float64),
        heavy_counts=counts[heavy].astype(np.int64),
        light=np.repeat(distinct[light], counts[light]).astype(np.float64),
    )


def _batches(resamples: int, width: int) -> Iterator[int]:
    """Batch sizes covering ``resamples`` with about :data:`BATCH_ELEMENTS` draws each."""
    size = max(1, BATCH_ELEMENTS // max(width, 1))
    done = 0
    while done < resamples:
        step = min(size, resamples - done)
        yield step
        done += step


def bootstrap_means(deltas: Floats, resamples: int, rng: np.random.Generator) -> Floats:
    """``resamples`` means of ``len(deltas)`` pairs drawn with replacement.

    One multinomial draw per resample says how many of the ``n`` draws land
    on each heavy value and how many on the light pool; the light draws are
    then made one by one (uniform over the light pairs).
    """
    n = len(deltas)
    split = _split(deltas)
    light_count = len(split.light)
    shares = np.append(split.heavy_counts, light_count) / n
    means = np.empty(resamples, dtype=np.float64)
    done = 0
    for size in _batches(resamples, max(light_count, len(shares))):
        counts = rng.multinomial(n, shares, size=size)
        sums = counts[:, :-1] @ split.heavy_values
        pooled = counts[:, -1]
        drawn = int(pooled.sum())
        if drawn:
            draws = split.light.take(rng.integers(0, light_count, size=drawn, dtype=np.int32))
            # One segment of draws per resample; an empty segment adds nothing.
            starts = np.concatenate(([0], np.cumsum(pooled)[:-1]))
            segment_sums = np.add.reduceat(draws, np.minimum(starts, drawn - 1))
            sums = sums + np.where(pooled > 0, segment_sums, 0.0)
        means[done : done + size] = sums / n
        done += size
    return means


def sign_flip_p_value(deltas: Floats, resamples: int, rng: np.random.Generator) -> float:
    """Two-sided p-value of ``mean(deltas)`` under random signs.

    A zero difference contributes nothing whatever its sign; a heavy absolute
    value shared by ``f`` pairs contributes ``value * (2 * Binomial(f, 1/2) - f)``;
    the light ones get one random sign each.
    """
    n = len(deltas)
    observed = abs(float(deltas.mean()))
    magnitudes = np.abs(deltas[deltas != 0.0])
    split = _split(magnitudes)
    # Equal statistics summed in another order may differ in the last bits.
    tolerance = 1e-12 * max(float(magnitudes.sum()) / n, 1e-300)
    signs = _SignTable(split.light)
    extreme = 0
    for size in _batches(resamples, max(len(split.light) // 8, len(split.heavy_values))):
        plus = rng.binomial(split.heavy_counts, 0.5, size=(size, len(split.heavy_counts)))
        sums = (2 * plus - split.heavy_counts) @ split.heavy_values + signs.sums(rng, size)
        extreme += int(np.count_nonzero(np.abs(sums / n) >= observed - tolerance))
    return (1 + extreme) / (resamples + 1)


class _SignTable:
    """Random-sign sums of many values, eight values per random byte.

    The values are cut into blocks of eight; a block's 256 signed sums (one
    per sign pattern, bit k set = value k positive) are tabulated once, so a
    resample costs one random byte and one lookup per block.
    """

    def __init__(self, values: Floats) -> None:
        blocks = -(-len(values) // 8)
        padded = np.zeros(blocks * 8, dtype=np.float64)
        padded[: len(values)] = values
        patterns = (np.arange(256)[:, None] >> np.arange(8)[None, :]) & 1
        signs = (2 * patterns - 1).astype(np.float64)
        self.blocks = blocks
        self.table = (padded.reshape(blocks, 8) @ signs.T).ravel()
        self.offsets = np.arange(blocks, dtype=np.int32) * 256

    def sums(self, rng: np.random.Generator, size: int) -> Floats:
        """``size`` signed sums, each with fresh uniformly random signs."""
        if not self.blocks:
            return np.zeros(size, dtype=np.float64)
        patterns = np.frombuffer(rng.bytes(size * self.blocks), dtype=np.uint8)
        index = patterns.reshape(size, self.blocks).astype(np.int32) + self.offsets
        summed: Floats = self.table.take(index).sum(axis=1)
        return summed


def _finite(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None

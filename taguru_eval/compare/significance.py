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

With tag slices (``tags``: HEAD's case tags), every (tag, metric) is tested the
same way over the slice's pairs. All the tests of one comparison are one
family: their p-values are adjusted together (:mod:`.multiplicity`, Holm by
default), and the verdicts read the adjusted ones:

* ``regressed`` / ``improved`` — adjusted ``p < alpha``, the mean moved in the
  metric's worse / better direction (the catalog's ``higher_is_better``);
* ``inconclusive`` — not significant, and the interval still reaches further
  than the metric's ``tolerance`` in the worse direction: a regression that
  matters is not ruled out (default tolerance :data:`DEFAULT_TOLERANCE`);
* ``no significant change`` — not significant, and the interval rules out a
  regression beyond the tolerance;
* ``not tested`` — no pair.

Each test also gets its **minimum detectable effect**: the shift the test finds
with probability :data:`POWER`, by the normal approximation of the paired test,
``MDE = (z(1 - a/2) + z(POWER)) * sd(d) / sqrt(n)``. ``a`` is the level the
test must reach after correction when it is the only real shift of the family:
``alpha / m`` for ``holm`` and ``bh`` over ``m`` tests (Holm's first step and
BH's smallest), ``alpha`` without correction — so a shift of at least the MDE
is found at least :data:`POWER` of the time whatever the other tests do.

Both draws come from NumPy generators seeded by ``(seed, metric, test)`` (and
the tag, for a slice), so a result is reproducible and does not depend on which
other metrics are tested.

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
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any, Final, Literal, NamedTuple, Protocol

import numpy as np
import numpy.typing as npt
import polars as pl

from taguru_eval.catalog import ANSWERS_METRICS, CATALOG, Catalog
from taguru_eval.compare.model import EPSILON, base_column, delta_column, head_column
from taguru_eval.compare.multiplicity import (
    CORRECTIONS,
    DEFAULT_CORRECTION,
    Correction,
    adjust_p_values,
)
from taguru_eval.compare.tags import slice_rank, tag_membership
from taguru_eval.errors import EXIT_GATE, EXIT_OK

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

DEFAULT_TOLERANCE: Final = 0.01
"""The regression size (in the metric's own units) that does not matter, for a
metric given no tolerance: one point of a 0-1 metric."""

POWER: Final = 0.8
"""The detection probability the minimum detectable effect is computed for."""

SIGNIFICANT_REGRESSION: Final = "regressed"
SIGNIFICANT_IMPROVEMENT: Final = "improved"
NOT_SIGNIFICANT: Final = "no significant change"
INCONCLUSIVE: Final = "inconclusive"
NOT_TESTED: Final = "not tested"
"""Verdicts of one test: a significant move either way, a non-significant one
that rules out a regression beyond the tolerance, one that does not, or no
pair to test."""
PASS: Final = "pass"
"""A family's finding when no test regressed or was inconclusive."""

FailOn = Literal["regression", "inconclusive"]
FAIL_ON: Final[tuple[FailOn, ...]] = ("regression", "inconclusive")
"""What a gate may fail on (``--fail-on-regression``, ``--fail-on-inconclusive``),
each stricter than the one before it (the GitHub Action's ``fail-on`` levels)."""


@dataclass(frozen=True)
class Verdict:
    """Would CI fail? :meth:`Significance.verdict`'s answer under a ``fail_on``.

    ``finding`` is the worst finding whatever ``fail_on`` says (``regressed``,
    ``inconclusive`` or ``pass``); ``exit_code`` is compare's (3 when a condition
    of ``fail_on`` holds, else 0); ``reasons`` say which tests met each one, one
    line a condition, as compare prints them after ``taguru: evaluate: ``."""

    finding: str
    exit_code: int
    reasons: tuple[str, ...] = ()

    @property
    def failed(self) -> bool:
        return self.exit_code != EXIT_OK


HEAVY_MIN_PAIRS: Final = 32
"""A difference value shared by at least this many pairs is drawn as one count."""

HEAVY_MAX_VALUES: Final = 256
"""At most this many heavy values (the most frequent), to bound the count draws."""

BATCH_ELEMENTS: Final = 1 << 22
"""Random draws materialised at once (about 32 MiB of float64)."""

MEASURED_SCHEMA: Final = {
    "tag": pl.String,
    "metric": pl.String,
    "higher_is_better": pl.Boolean,
    "n": pl.Int64,
    "base_mean": pl.Float64,
    "head_mean": pl.Float64,
    "mean_delta": pl.Float64,
    "sd_delta": pl.Float64,
    "ci_low": pl.Float64,
    "ci_high": pl.Float64,
    "p_value": pl.Float64,
}
"""What one test measures from its pairs, before the family is judged (:func:`judge`)."""

SIGNIFICANCE_SCHEMA: Final = {
    **MEASURED_SCHEMA,
    "p_adjusted": pl.Float64,
    "mde": pl.Float64,
    "tolerance": pl.Float64,
    "verdict": pl.String,
}
"""One row per test: ``tag`` is null for the whole run, else the tag slice."""

Floats = npt.NDArray[np.float64]
Ints = npt.NDArray[np.int64]


@dataclass(frozen=True)
class Significance:
    """The paired tests of one comparison, with the settings that produced them.

    ``frame`` has one row per test (:data:`SIGNIFICANCE_SCHEMA`): the whole
    run's (``tag`` null) for every compared metric, then each tag slice's
    when tags were given. ``n`` matched pairs, both sides' means over those
    pairs, ``mean_delta`` (head - base) and its standard deviation
    ``sd_delta``, the bootstrap interval ``ci_low``/``ci_high`` at
    ``confidence``, the sign-flip ``p_value``, the ``p_adjusted`` of the
    family under ``correction``, the minimum detectable effect ``mde``, the
    metric's ``tolerance`` and the ``verdict`` (module docstring).
    """

    frame: pl.DataFrame
    resamples: int
    seed: int
    alpha: float
    correction: Correction = DEFAULT_CORRECTION
    by_tag: bool = False

    @property
    def confidence(self) -> float:
        """The interval's coverage: ``1 - alpha``."""
        return 1.0 - self.alpha

    @property
    def family_size(self) -> int:
        """How many tests were made (and adjusted together): those with a pair."""
        return int((self.frame.get_column("n") > 0).sum())

    @property
    def family(self) -> str:
        """Which tests were adjusted together: the whole run's compared metrics, and
        with ``--by-tag`` HEAD's tag slices too (one family either way)."""
        if self.by_tag:
            return "the whole run's metrics and HEAD's tag slices (--by-tag)"
        return "the whole run's metrics"

    @property
    def mde_alpha(self) -> float:
        """The level the minimum detectable effect is computed at (module docstring)."""
        return mde_alpha(self.alpha, self.correction, self.family_size)

    def regressed(self) -> pl.DataFrame:
        """The tests that regressed significantly (what ``--fail-on-regression`` gates on)."""
        return self.frame.filter(pl.col("verdict") == SIGNIFICANT_REGRESSION)

    def inconclusive(self) -> pl.DataFrame:
        """The tests that are inconclusive (what ``--fail-on-inconclusive`` gates on)."""
        return self.frame.filter(pl.col("verdict") == INCONCLUSIVE)

    def verdict(self, fail_on: Iterable[FailOn]) -> Verdict:
        """Would a gate failing on ``fail_on`` fail (``compare --fail-on-…``, the
        Action's ``fail-on``)? The conditions are judged by the adjusted p-values."""
        conditions = set(fail_on)
        noun = "test(s)" if self.by_tag else "metric(s)"
        level = f"alpha {self.alpha:g}"
        if self.correction != "none":
            level = f"{self.correction}-adjusted p, {level}"
        regressed = [test_label(row) for row in self.regressed().iter_rows(named=True)]
        inconclusive = [test_label(row) for row in self.inconclusive().iter_rows(named=True)]
        reasons = []
        if "regression" in conditions and regressed:
            reasons.append(
                f"{len(regressed)} {noun} regressed significantly ({level}): {', '.join(regressed)}"
            )
        if "inconclusive" in conditions and inconclusive:
            reasons.append(
                f"{len(inconclusive)} {noun} inconclusive ({level}; a regression beyond the "
                f"tolerance is not ruled out, default {DEFAULT_TOLERANCE:g}): "
                f"{', '.join(inconclusive)}"
            )
        finding = SIGNIFICANT_REGRESSION if regressed else INCONCLUSIVE if inconclusive else PASS
        return Verdict(finding, EXIT_GATE if reasons else EXIT_OK, tuple(reasons))

    def header_block(self) -> dict[str, object]:
        """The ``significance`` member added to the changes.jsonl header."""
        block: dict[str, object] = {
            "method": {
                "interval": "paired bootstrap, percentile",
                "test": "paired randomization (sign flip), two-sided",
                "correction": _CORRECTION_TEXT[self.correction],
                "mde": "(z(1 - mde_alpha/2) + z(power)) * sd(d) / sqrt(n), normal approximation",
                "inconclusive": "not significant, and the interval reaches further than "
                "the tolerance in the metric's worse direction",
            },
            "resamples": self.resamples,
            "seed": self.seed,
            "alpha": self.alpha,
            "correction": self.correction,
            "tests": self.family_size,
            "family": self.family,
            "power": POWER,
            "mde_alpha": self.mde_alpha,
            "metrics": [
                self._entry(row) for row in self.frame.iter_rows(named=True) if row["tag"] is None
            ],
        }
        if self.by_tag:
            block["by_tag"] = [
                {"tag": row["tag"], **self._entry(row)}
                for row in self.frame.iter_rows(named=True)
                if row["tag"] is not None
            ]
        return block

    def _entry(self, row: Mapping[str, Any]) -> dict[str, object]:
        return {
            "metric": row["metric"],
            "n": row["n"],
            "base_mean": _finite(row["base_mean"]),
            "head_mean": _finite(row["head_mean"]),
            "mean_delta": _finite(row["mean_delta"]),
            "ci": [_finite(row["ci_low"]), _finite(row["ci_high"])],
            "p_value": _finite(row["p_value"]),
            "p_adjusted": _finite(row["p_adjusted"]),
            "correction": self.correction,
            "mde": _finite(row["mde"]),
            "tolerance": row["tolerance"],
            "verdict": row["verdict"],
        }

    def lines(self) -> list[str]:
        """The terminal lines printed after compare's summary."""
        family = (
            f"{self.correction} over {self.family_size} test(s)"
            if self.correction != "none"
            else f"no correction over {self.family_size} test(s)"
        ) + f" of one family, {self.family}"
        lines = [
            f"  significance (paired; {self.resamples} resamples, seed {self.seed}, "
            f"alpha {self.alpha:g}; {family}; MDE at {POWER:.0%} power, "
            f"alpha {self.mde_alpha:.2g}):"
        ]
        lines.extend(self._test_lines(self.frame.filter(pl.col("tag").is_null())))
        if self.by_tag:
            lines.append("  by tag (HEAD's tags; one family with the lines above):")
            lines.extend(self._test_lines(self.frame.filter(pl.col("tag").is_not_null())))
        return lines

    def _test_lines(self, frame: pl.DataFrame) -> list[str]:
        percent = f"{self.confidence * 100:g}%"
        lines = []
        untested = []
        for row in frame.iter_rows(named=True):
            label = test_label(row)
            if row["n"] == 0:
                untested.append(label)
                continue
            adjusted = (
                f" ({self.correction} {row['p_adjusted']:.4f})" if self.correction != "none" else ""
            )
            mde = mde_text(row)
            lines.append(
                f"    {label}: Δ {row['mean_delta']:+.4f} over {row['n']} pair(s), "
                f"{percent} CI [{row['ci_low']:+.4f}, {row['ci_high']:+.4f}], "
                f"p {row['p_value']:.4f}{adjusted}, MDE {mde} — {verdict_text(row)}"
            )
        if untested:
            lines.append(f"    {NOT_TESTED} (no matched pair): {', '.join(untested)}")
        return lines


_CORRECTION_TEXT: Final[Mapping[Correction, str]] = {
    "holm": "Holm step-down over every test of this compare (family-wise error <= alpha)",
    "bh": "Benjamini-Hochberg step-up over every test of this compare "
    "(false discovery rate <= alpha)",
    "none": "none: each test at alpha on its own",
}


def test_label(row: Mapping[str, Any]) -> str:
    """How a test is named on the terminal: ``recall.mrr``, or ``recall.mrr [faq]`` for a slice."""
    return row["metric"] if row["tag"] is None else f"{row['metric']} [{row['tag']}]"


def verdict_text(row: Mapping[str, Any]) -> str:
    """A test's verdict, with why an inconclusive one is so and what would settle it."""
    verdict: str = row["verdict"]
    if verdict != INCONCLUSIVE:
        return verdict
    reach = regression_reach(row["ci_low"], row["ci_high"], row["higher_is_better"])
    tolerance: float = row["tolerance"]
    what = "a regression" if row["higher_is_better"] is not None else "a move either way"
    text = f"{verdict}: {what} up to {reach:.4f} is not ruled out (tolerance {tolerance:g})"
    mde = row["mde"]
    if mde is None:
        alike = "one pair has" if row["n"] <= 1 else "pairs that all moved alike have"
        return f"{text}; {alike} no spread to size the MDE from"
    if tolerance > 0.0 and mde > tolerance:
        needed = math.ceil(row["n"] * (mde / tolerance) ** 2)
        text += f"; about {needed} pairs would bring the MDE down to {tolerance:g}"
    return text


NO_VARIANCE: Final = "n/a (no variance: cannot tell)"


def mde_text(row: Mapping[str, Any]) -> str:
    """A test's MDE as text: 4 decimals; ``n/a (no variance: cannot tell)`` when
    every pair moved alike (an MDE of 0 would promise to see any shift)."""
    if row["mde"] is not None:
        return f"{row['mde']:.4f}"
    return NO_VARIANCE if row["n"] > 1 and row["sd_delta"] == 0.0 else "n/a"


def regression_reach(low: float, high: float, higher_is_better: bool | None) -> float:
    """How far an interval reaches in the metric's worse direction (a regression's size);
    either way for a metric without a direction."""
    if higher_is_better is None:
        return max(abs(low), abs(high))
    return -low if higher_is_better else high


def mde_alpha(alpha: float, correction: Correction, tests: int) -> float:
    """The per-test level the MDE is computed at: a corrected family of ``tests``
    tests calls its smallest p-value significant below ``alpha / tests`` (Holm's
    first step, BH's smallest), whatever the others are."""
    if correction == "none" or tests <= 1:
        return alpha
    return alpha / tests


def mde_factor(alpha: float, power: float = POWER) -> float:
    """``z(1 - alpha/2) + z(power)``: the MDE in standard errors of the mean difference."""
    normal = NormalDist()
    return normal.inv_cdf(1.0 - alpha / 2.0) + normal.inv_cdf(power)


class Compared(Protocol):
    """What the tests read of a :class:`~taguru_eval.compare.report.Comparison`: its
    per-case frame and the metrics it classified by (a protocol, so this module
    needs no import of the comparison, which offers these tests as ``.tests``)."""

    @property
    def cases(self) -> pl.DataFrame: ...

    @property
    def compared(self) -> Sequence[str]: ...


class PairedCases(NamedTuple):
    """A :attr:`Comparison.cases`-shaped frame (``case_id``, ``in_base``, ``in_head``
    and the ``<metric>.base/.head/.delta`` columns) and the metrics to test: what
    :func:`significance` reads of a comparison, for a frame made without one."""

    cases: pl.DataFrame
    compared: Sequence[str]


def significance(
    comparison: Compared,
    *,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
    alpha: float = DEFAULT_ALPHA,
    correction: Correction = DEFAULT_CORRECTION,
    tolerances: Mapping[str, float] | None = None,
    tags: pl.DataFrame | None = None,
    catalog: Catalog = CATALOG,
) -> Significance:
    """Paired bootstrap intervals, sign-flip p-values, adjusted p-values and MDEs
    for every compared metric (and, with ``tags``, every tag slice of it).

    A metric's direction (which sign is a regression) is the catalog's
    ``higher_is_better``; a metric without one is never called regressed or
    improved. ``correction`` is ``holm``, ``bh`` or ``none``;
    ``tolerances`` maps a compared metric to the regression size that does not
    matter (default :data:`DEFAULT_TOLERANCE`); ``tags`` is ``case_id``,
    ``tags`` (list of strings) of HEAD's cases — a case is in the slices its
    HEAD tags name, an untagged one in ``(no tag)``. ``ValueError`` for
    ``resamples`` outside 1..=:data:`MAX_RESAMPLES`, ``alpha`` outside (0, 1),
    an unknown correction, or a tolerance that is negative, not finite or for
    a metric not compared.
    """
    compared = comparison.compared
    if not set(compared) <= set(catalog):
        # Two runs given --answers classify by answers.* too: their directions.
        catalog = catalog.with_metrics(
            {name: ANSWERS_METRICS[name] for name in ANSWERS_METRICS if name not in catalog}
        )
    if not 1 <= resamples <= MAX_RESAMPLES:
        raise ValueError(f"resamples must be a positive integer of at most {MAX_RESAMPLES}")
    if not 0.0 < alpha < 1.0:
        raise ValueError("alpha must be strictly between 0 and 1")
    if correction not in CORRECTIONS:
        raise ValueError(f"correction must be one of {', '.join(CORRECTIONS)}")
    given = dict(tolerances or {})
    for metric, delta in given.items():
        if metric not in compared:
            raise ValueError(f"a tolerance for '{metric}', which is not compared")
        if not (math.isfinite(delta) and delta >= 0.0):
            raise ValueError(f"the tolerance of '{metric}' must be a finite number >= 0")
    paired = comparison.cases.filter(pl.col("in_base") & pl.col("in_head"))
    settings = _Settings(resamples, seed, alpha, catalog)
    rows = [_test_metric(None, metric, paired, settings) for metric in compared]
    if tags is not None:
        rows.extend(_slice_rows(paired, tags, compared, settings))
    measured = pl.DataFrame(rows, schema=MEASURED_SCHEMA, orient="row")
    frame = judge(measured, alpha, correction, given)
    return Significance(frame, resamples, seed, alpha, correction, by_tag=tags is not None)


def judge(
    measured: pl.DataFrame,
    alpha: float,
    correction: Correction,
    tolerances: Mapping[str, float],
) -> pl.DataFrame:
    """The family's adjusted p-values, MDEs, tolerances and verdicts beside its
    measured tests (one row per test, the columns before ``p_adjusted`` in
    :data:`SIGNIFICANCE_SCHEMA`)."""
    tested = (measured.get_column("n") > 0).to_numpy()
    p_values = measured.get_column("p_value").to_numpy().astype(np.float64)
    adjusted = np.full(len(p_values), np.nan)
    adjusted[tested] = adjust_p_values(p_values[tested], correction)
    factor = mde_factor(mde_alpha(alpha, correction, int(tested.sum())))
    hib = pl.col("higher_is_better")
    delta = pl.col("mean_delta")
    significant = (pl.col("p_adjusted") < alpha) & (delta != 0.0) & hib.is_not_null()
    # How far the interval reaches in the worse direction: the regression not ruled out.
    reach = (
        pl.when(hib)
        .then(-pl.col("ci_low"))
        .when(~hib)
        .then(pl.col("ci_high"))
        .otherwise(pl.max_horizontal(pl.col("ci_low").abs(), pl.col("ci_high").abs()))
    )
    verdict = (
        pl.when(pl.col("n") == 0)
        .then(pl.lit(NOT_TESTED))
        .when(significant & ((delta > 0.0) == hib))
        .then(pl.lit(SIGNIFICANT_IMPROVEMENT))
        .when(significant)
        .then(pl.lit(SIGNIFICANT_REGRESSION))
        # EPSILON: an interval ending exactly at the tolerance rules it out (float noise).
        .when(reach > pl.col("tolerance") + EPSILON)
        .then(pl.lit(INCONCLUSIVE))
        .otherwise(pl.lit(NOT_SIGNIFICANT))
    )
    return (
        measured.with_columns(
            pl.Series("p_adjusted", adjusted, dtype=pl.Float64).fill_nan(None),
            # Pairs that all moved alike (every delta zero, say) have no spread to
            # size the MDE from: null, shown as "no variance: cannot tell", never 0.
            pl.when(pl.col("sd_delta") > 0.0)
            .then(factor * pl.col("sd_delta") / pl.col("n").cast(pl.Float64).sqrt())
            .alias("mde"),
            pl.col("metric")
            .replace_strict(dict(tolerances), default=DEFAULT_TOLERANCE, return_dtype=pl.Float64)
            .alias("tolerance"),
        )
        .with_columns(verdict.alias("verdict"))
        .select(list(SIGNIFICANCE_SCHEMA))
    )


@dataclass(frozen=True)
class _Settings:
    resamples: int
    seed: int
    alpha: float
    catalog: Catalog


def _slice_rows(
    paired: pl.DataFrame, tags: pl.DataFrame, compared: Sequence[str], settings: _Settings
) -> list[tuple[object, ...]]:
    """Every (tag, metric) test, tags in name order and ``(no tag)`` last; a tag
    none of whose cases is matched on both sides is still listed, untested."""
    membership = tag_membership(tags, all_cases=False)
    names = membership.select("tag").unique().sort([slice_rank(), pl.col("tag")]).get_column("tag")
    parts = membership.join(paired, on="case_id", how="inner").partition_by(
        "tag", as_dict=True, include_key=False
    )
    empty = paired.clear()
    return [
        _test_metric(tag, metric, parts.get((tag,), empty), settings)
        for tag in names
        for metric in compared
    ]


def _test_metric(
    tag: str | None, metric: str, paired: pl.DataFrame, settings: _Settings
) -> tuple[object, ...]:
    definition = settings.catalog.get(metric)
    higher_is_better = None if definition is None else definition.higher_is_better
    pairs = paired.select(
        pl.col(base_column(metric)), pl.col(head_column(metric)), pl.col(delta_column(metric))
    ).filter(pl.all_horizontal(pl.all().is_not_null() & pl.all().is_finite()))
    n = pairs.height
    if n == 0:
        return (tag, metric, higher_is_better, 0, *([None] * 7))
    base = pairs.get_column(base_column(metric)).to_numpy()
    head = pairs.get_column(head_column(metric)).to_numpy()
    deltas = pairs.get_column(delta_column(metric)).to_numpy().astype(np.float64)
    observed = float(deltas.mean())
    alpha = settings.alpha
    means = bootstrap_means(
        deltas, settings.resamples, _generator(settings.seed, metric, "bootstrap", tag)
    )
    low, high = np.quantile(means, [alpha / 2.0, 1.0 - alpha / 2.0])
    p_value = sign_flip_p_value(
        deltas, settings.resamples, _generator(settings.seed, metric, "sign-flip", tag)
    )
    # One pair has no spread: its MDE is unknown rather than 0.
    spread = float(deltas.std(ddof=1)) if n > 1 else None
    return (
        tag,
        metric,
        higher_is_better,
        n,
        float(base.mean()),
        float(head.mean()),
        observed,
        spread,
        float(low),
        float(high),
        p_value,
    )


def _generator(seed: int, metric: str, test: str, tag: str | None) -> np.random.Generator:
    """One stream per (seed, metric, test[, tag]): results never depend on the other
    tests; the whole run's streams are the ones compare drew before tag slices."""
    entropy = [seed, zlib.crc32(metric.encode("utf-8")), zlib.crc32(test.encode("utf-8"))]
    if tag is not None:
        entropy.append(zlib.crc32(tag.encode("utf-8")))
    return np.random.default_rng(entropy)


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

"""Calibrate compare's significance verdicts on synthetic runs with a known truth.

A/A: ``--aa`` comparisons per design of two runs with no real change
(``tests/support/paired_runs.py``: nine correlated per-case metrics with
realistic ties and zeros; ``redraw`` draws every case of HEAD again from the
same distribution, ``noise`` draws a random quarter again). A comparison is a
false alarm when any of its nine tests says ``regressed`` or ``improved``. The
family-wise false-alarm rate is printed with its 95% Wilson interval for
``holm`` (the default), ``bh`` and no correction: Holm must stay at or below
alpha (5%), the upper end of its interval at or below 7%.

Detection: ``--detect`` comparisons per design and size where HEAD's
recall@k is lower by 0.02 on average, at 1,000 and 10,000 cases, with the mean
MDE the tests report beside the share that came out ``regressed`` (at least
80% wherever the shift is at least the MDE); then at a shift equal to the MDE
the tests report under it, at 1,000 cases and compare's default 10,000
resamples, where the detection is 80% by construction: its 95% interval must
reach 80%.

Every test goes through :func:`taguru_eval.compare.significance.significance`
(the code ``compare --significance`` runs), and the other corrections through
its :func:`~taguru_eval.compare.significance.judge` on the same draws.

    .venv/bin/python benchmarks/aa_calibration.py [--aa 500] [--detect 200]
        [--cases 1000] [--resamples 2000] [--seed 20261205]
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from pathlib import Path
from statistics import NormalDist

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from support.paired_runs import RECALL, Design, paired_runs  # noqa: E402

from taguru_eval.catalog import COMPARISON_METRICS  # noqa: E402
from taguru_eval.compare.multiplicity import CORRECTIONS  # noqa: E402
from taguru_eval.compare.significance import (  # noqa: E402
    MEASURED_SCHEMA,
    SIGNIFICANT_IMPROVEMENT,
    SIGNIFICANT_REGRESSION,
    PairedCases,
    judge,
    significance,
)

ALPHA = 0.05
SHIFT = -0.02
FWER_MAX = 0.05
FWER_UPPER_MAX = 0.07
DETECTION_MIN = 0.80
MDE_RESAMPLES = 10_000
"""Resamples at the MDE: compare's default, since a coarser p-value loses power there."""
DESIGNS: tuple[Design, ...] = ("redraw", "noise")


def wilson(hits: int, trials: int, confidence: float = 0.95) -> tuple[float, float]:
    """The Wilson score interval of a binomial proportion."""
    z = NormalDist().inv_cdf(0.5 + confidence / 2.0)
    share = hits / trials
    centre = (share + z * z / (2 * trials)) / (1 + z * z / trials)
    half = (z / (1 + z * z / trials)) * math.sqrt(
        share * (1 - share) / trials + z * z / (4 * trials * trials)
    )
    return max(0.0, centre - half), min(1.0, centre + half)


def rate(hits: int, trials: int) -> str:
    low, high = wilson(hits, trials)
    return f"{hits / trials:6.1%} [{low:.1%}, {high:.1%}]"


def false_alarms(
    design: Design, trials: int, cases: int, resamples: int, seed: int
) -> dict[str, int]:
    """How many of ``trials`` A/A comparisons raised any alarm, per correction."""
    alarms = dict.fromkeys(CORRECTIONS, 0)
    for trial in range(trials):
        rng = np.random.default_rng([seed, DESIGNS.index(design), trial])
        frame = paired_runs(rng, cases, design)
        paired = PairedCases(frame, COMPARISON_METRICS)
        result = significance(paired, resamples=resamples, seed=trial, correction="holm")
        measured = result.frame.select(list(MEASURED_SCHEMA))
        for correction in CORRECTIONS:
            judged = (
                result.frame if correction == "holm" else judge(measured, ALPHA, correction, {})
            )
            verdicts = set(judged.get_column("verdict").to_list())
            alarms[correction] += bool(verdicts & {SIGNIFICANT_REGRESSION, SIGNIFICANT_IMPROVEMENT})
    return alarms


def detection(
    design: Design, trials: int, cases: int, shift: float, resamples: int, seed: int
) -> tuple[int, float]:
    """How many of ``trials`` comparisons with the recall shift called it regressed
    (holm), and the mean MDE of the recall test."""
    detected = 0
    mdes = []
    for trial in range(trials):
        rng = np.random.default_rng([seed, 10 + DESIGNS.index(design), cases, trial])
        frame = paired_runs(rng, cases, design, shift=shift)
        paired = PairedCases(frame, COMPARISON_METRICS)
        result = significance(paired, resamples=resamples, seed=trial)
        recall = result.frame.row(COMPARISON_METRICS.index(RECALL), named=True)
        detected += recall["verdict"] == SIGNIFICANT_REGRESSION
        mdes.append(recall["mde"])
    return detected, float(np.mean(mdes))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--aa", type=int, default=500, help="A/A comparisons per design")
    parser.add_argument("--detect", type=int, default=200, help="shifted comparisons per row")
    parser.add_argument("--cases", type=int, default=1_000, help="cases of an A/A comparison")
    parser.add_argument("--resamples", type=int, default=2_000)
    parser.add_argument("--seed", type=int, default=20261205)
    args = parser.parse_args()
    started = time.perf_counter()
    print(
        f"A/A: {args.aa} comparisons per design, {args.cases:,} cases, 9 metrics, "
        f"{args.resamples:,} resamples, alpha {ALPHA:g}; family-wise false-alarm rate "
        "[95% Wilson]"
    )
    print(f"  {'design':<8} {'holm':<24} {'bh':<24} {'none (uncorrected)':<24}")
    pooled: dict[str, int] = dict.fromkeys(CORRECTIONS, 0)
    for design in DESIGNS:
        alarms = false_alarms(design, args.aa, args.cases, args.resamples, args.seed)
        for correction in CORRECTIONS:
            pooled[correction] += alarms[correction]
        print(
            f"  {design:<8} "
            + " ".join(f"{rate(alarms[c], args.aa):<24}" for c in ("holm", "bh", "none"))
        )
    total = args.aa * len(DESIGNS)
    print(
        f"  {'pooled':<8} "
        + " ".join(f"{rate(pooled[c], total):<24}" for c in ("holm", "bh", "none"))
    )
    _, holm_high = wilson(pooled["holm"], total)
    met = pooled["holm"] / total <= FWER_MAX and holm_high <= FWER_UPPER_MAX
    print(
        f"  holm: {pooled['holm'] / total:.1%} (target <= {FWER_MAX:.0%}), upper end "
        f"{holm_high:.1%} (target <= {FWER_UPPER_MAX:.0%}): {'met' if met else 'MISSED'}"
    )

    print(
        f"detection of a {SHIFT:+g} recall@k shift (holm, {args.detect} comparisons each): "
        "detected [95% Wilson], mean MDE of recall@k"
    )
    mde_at: dict[Design, float] = {}
    for design in DESIGNS:
        for cases in (1_000, 10_000):
            hits, mde = detection(design, args.detect, cases, SHIFT, args.resamples, args.seed)
            if cases == 1_000:
                mde_at[design] = mde
            covered = abs(SHIFT) >= mde
            verdict = (
                ("met" if hits / args.detect >= DETECTION_MIN else "MISSED")
                if covered
                else "shift < MDE: no promise"
            )
            print(
                f"  {design:<8} n={cases:<7,} {rate(hits, args.detect)}  MDE {mde:.4f}  ({verdict})"
            )
    print(
        f"at a shift equal to its own MDE, 1,000 cases, {MDE_RESAMPLES:,} resamples (compare's "
        f"default): the MDE's promise is {DETECTION_MIN:.0%}, so the 95% interval must reach it"
    )
    for design in DESIGNS:
        # A bigger shift spreads the differences a little more, so the MDE the tests
        # report under it is a little larger: shift by that one (one more round).
        shift = -mde_at[design]
        hits, mde = detection(design, args.detect, 1_000, shift, MDE_RESAMPLES, args.seed + 1)
        if mde > -shift:
            shift = -mde
            hits, mde = detection(design, args.detect, 1_000, shift, MDE_RESAMPLES, args.seed + 2)
        _, high = wilson(hits, args.detect)
        verdict = "met" if high >= DETECTION_MIN else "MISSED"
        print(
            f"  {design:<8} shift {shift:+.4f}: {rate(hits, args.detect)}  "
            f"MDE {mde:.4f}  ({verdict})"
        )
    load = os.getloadavg()[0]
    print(f"{time.perf_counter() - started:.0f} s, load {load:.2f}")


if __name__ == "__main__":
    main()

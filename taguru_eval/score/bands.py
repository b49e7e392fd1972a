"""``refusal-bands`` (ABSTENTION.md §3.12): where the passage vector floor could sit.

A report-only diagnostic, the passage-vector analogue of taguru's
``calibrate``. From one sweep search per case (floor 0.05, a wide window):

* the **upper band** is, per answerable case, the vector cosine of its
  best-ranked hit that satisfies an expected source (relevance ≥ 1) — the
  floor must stay below these for the right passages to count as support;
* the **lower band** is, per must-refuse case, its best vector cosine — the
  floor must sit above these for the probe to abstain.

``gap = min(upper) − max(lower)``; a positive gap suggests its midpoint
(rounded to two decimals when that stays inside the gap), a gap ≤ 0 is an
overlap — an honest finding, not an error. It reads cosines, which is exactly
why it never gates.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from taguru_eval.tables.schemas import POPULATION_EVAL, POPULATION_MUST_REFUSE


@dataclass(frozen=True)
class Bands:
    """The two bands and what they imply; ``None`` where a band has no sample."""

    upper: pl.DataFrame  # case_id, cosine (one row per answerable case with a sample)
    lower: pl.DataFrame  # case_id, cosine (one row per must-refuse case with a sample)
    answerable: int
    must_refuse: int
    below_sweep: tuple[str, ...] = ()
    """Answerable cases whose best-ranked expected hit carries no vector lane even at
    the sweep floor: no floor at or above it makes that hit support."""
    not_served: tuple[str, ...] = ()
    """Answerable cases with no expected hit in the window at all."""
    failed: tuple[str, ...] = ()
    """Cases whose sweep search failed: in neither band, nor in its count."""

    @property
    def upper_min(self) -> float | None:
        return None if self.upper.is_empty() else float(self.upper.get_column("cosine").min())  # type: ignore[arg-type]

    @property
    def lower_max(self) -> float | None:
        return None if self.lower.is_empty() else float(self.lower.get_column("cosine").max())  # type: ignore[arg-type]

    @property
    def gap(self) -> float | None:
        if self.upper_min is None or self.lower_max is None:
            return None
        return self.upper_min - self.lower_max

    @property
    def suggestion(self) -> float | None:
        """The mid-gap floor, rounded to two decimals when that stays inside the gap."""
        gap = self.gap
        if gap is None or gap <= 0 or self.lower_max is None or self.upper_min is None:
            return None
        middle = (self.upper_min + self.lower_max) / 2
        rounded = round(middle, 2)
        return rounded if self.lower_max < rounded < self.upper_min else middle


def bands(
    hits: pl.DataFrame, expected: pl.DataFrame, answerable: pl.DataFrame, must_refuse: int
) -> Bands:
    """The bands from sweep ``hits`` (``population, case_index, case_id, rank,
    source, paragraph, vector_score``), the eval set's ``expected`` frame and
    the ``answerable`` cases (``case_index``, ``case_id``) that were searched."""
    relevant = expected.filter((pl.col("kind") == "source") & (pl.col("relevance") >= 1)).select(
        "case_index", "source", pl.col("paragraph").alias("expected_paragraph")
    )
    eval_hits = hits.filter(pl.col("population") == POPULATION_EVAL)
    best = (
        eval_hits.join(relevant, on=["case_index", "source"], how="inner")
        .filter(
            pl.col("expected_paragraph").is_null()
            | (pl.col("expected_paragraph") == pl.col("paragraph"))
        )
        .sort("case_index", "rank")
        .unique("case_index", keep="first", maintain_order=True)
        .select("case_index", "case_id", pl.col("vector_score").cast(pl.Float64).alias("cosine"))
    )
    upper = best.filter(pl.col("cosine").is_not_null()).select("case_id", "cosine")
    below = best.filter(pl.col("cosine").is_null()).get_column("case_id").to_list()
    not_served = (
        answerable.join(best, on="case_index", how="anti").sort("case_index").get_column("case_id")
    )
    lower = (
        hits.filter(
            (pl.col("population") == POPULATION_MUST_REFUSE) & pl.col("vector_score").is_not_null()
        )
        .group_by("case_index", maintain_order=True)
        .agg(
            pl.col("case_id").first(), pl.col("vector_score").max().cast(pl.Float64).alias("cosine")
        )
        .sort("case_index")
        .select("case_id", "cosine")
    )
    return Bands(
        upper=upper,
        lower=lower,
        answerable=answerable.height,
        must_refuse=must_refuse,
        below_sweep=tuple(below),
        not_served=tuple(not_served.to_list()),
    )

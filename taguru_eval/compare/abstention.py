"""compare's must-refuse block (ABSTENTION.md §3.10): verdict flips between two runs.

Each side's must-refuse verdicts (:class:`AbstentionSide`, read from its
``abstention`` block or from a stored run's ``refusal_cases`` table) are
joined on case_id; ``abstained → surfaced`` is a regression, ``surfaced →
abstained`` an improvement, and any undetermined or failed side is
``not_comparable``. The result is an additive header block of
changes.jsonl — the per-case lines stay eval.jsonl cases only, so a consumer
that tallies them never miscounts. Differences that limit the comparison
(rule, floors, the must-refuse file itself, a side without the block) are
warnings, never refusals.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

import polars as pl

from taguru_eval.compare.model import IMPROVED, NOT_COMPARABLE, REGRESSED
from taguru_eval.score.abstention import ABSTAINED, DETERMINATE, SURFACED

DIRECTIONS: Final = ("improved", "regressed", "unchanged", "added", "removed", NOT_COMPARABLE)
"""The block's ``counts`` keys, in order."""

SIDE_SCHEMA: Final = {"case_id": pl.String, "kind": pl.String, "verdict": pl.String}


@dataclass(frozen=True)
class AbstentionSide:
    """One run's must-refuse facts: its rule, effective floors, the file's
    digest and one row per case (``case_id``, ``kind``, ``verdict``)."""

    rule: str | None
    floors: tuple[float, ...]
    sha256: str | None
    cases: pl.DataFrame


@dataclass(frozen=True)
class AbstentionComparison:
    """The header's ``abstention`` block: counts, the listed changes, warnings.

    ``changes`` has one row per case whose direction is not ``unchanged``
    (``case_id``, ``kind``, ``base``, ``head``, ``direction``), by case_id.
    """

    counts: dict[str, int]
    changes: pl.DataFrame
    warnings: tuple[str, ...]

    def to_json(self) -> dict[str, object]:
        """The block as changes.jsonl's header writes it."""
        return {
            "counts": dict(self.counts),
            "changes": self.changes.to_dicts(),
            "warnings": list(self.warnings),
        }


def _last_occurrences(side: AbstentionSide, label: str) -> tuple[pl.DataFrame, list[str]]:
    """The side's cases with a repeated case_id kept once (its last occurrence, as
    compare reads repeated case records), and a warning for each repeated id.

    The must-refuse loader refuses a repeated case_id, so only an edited
    document holds one; joined as it is, it would count one case several times.
    """
    cases = side.cases
    repeated = cases.filter(~pl.col("case_id").is_last_distinct()).get_column("case_id")
    if repeated.is_empty():
        return cases, []
    warnings = [
        f"{label}: duplicate must-refuse case_id '{case_id}' — using the last occurrence"
        for case_id in repeated.unique(maintain_order=True).to_list()
    ]
    return cases.filter(pl.col("case_id").is_last_distinct()), warnings


def _missing_side(present: AbstentionSide, side: str, missing: str) -> AbstentionComparison:
    """Every case of the one side with a block is not comparable (§3.10)."""
    verdict = pl.col("verdict")
    absent = pl.lit(None, dtype=pl.String)
    kept, repeats = _last_occurrences(present, side)
    cases = kept.select(
        "case_id",
        "kind",
        (verdict if side == "BASE" else absent).alias("base"),
        (absent if side == "BASE" else verdict).alias("head"),
        pl.lit(NOT_COMPARABLE).alias("direction"),
    ).sort("case_id")
    counts = dict.fromkeys(DIRECTIONS, 0)
    counts[NOT_COMPARABLE] = cases.height
    warning = (
        f"{missing} has no abstention block (a run without --must-refuse, or a file taguru "
        f"wrote): the {cases.height} must-refuse case(s) of {side} are not comparable"
    )
    return AbstentionComparison(counts, cases, (*repeats, warning))


def compare_abstention(
    base: AbstentionSide | None, head: AbstentionSide | None
) -> AbstentionComparison | None:
    """The ``abstention`` header block, or None when neither side has one."""
    if base is None and head is None:
        return None
    if base is None:
        assert head is not None
        return _missing_side(head, "HEAD", "BASE")
    if head is None:
        return _missing_side(base, "BASE", "HEAD")
    base_cases, base_repeats = _last_occurrences(base, "BASE")
    head_cases, head_repeats = _last_occurrences(head, "HEAD")
    joined = (
        base_cases.select(
            "case_id", pl.col("kind").alias("base_kind"), pl.col("verdict").alias("base")
        )
        .join(
            head_cases.select(
                "case_id", pl.col("kind").alias("head_kind"), pl.col("verdict").alias("head")
            ),
            on="case_id",
            how="full",
            coalesce=True,
        )
        .with_columns(pl.coalesce("head_kind", "base_kind").alias("kind"))
    )
    b, h = pl.col("base"), pl.col("head")
    direction = (
        pl.when(h.is_null())
        .then(pl.lit("removed"))
        .when(b.is_null())
        .then(pl.lit("added"))
        .when(~b.is_in(DETERMINATE) | ~h.is_in(DETERMINATE))
        .then(pl.lit(NOT_COMPARABLE))
        .when((b == ABSTAINED) & (h == SURFACED))
        .then(pl.lit(REGRESSED))
        .when((b == SURFACED) & (h == ABSTAINED))
        .then(pl.lit(IMPROVED))
        .otherwise(pl.lit("unchanged"))
    )
    classified = joined.with_columns(direction.alias("direction")).select(
        "case_id", "kind", "base", "head", "direction"
    )
    counts = dict.fromkeys(DIRECTIONS, 0)
    for name, count in classified.group_by("direction").len().iter_rows():
        counts[name] = count
    changes = classified.filter(pl.col("direction") != "unchanged").sort("case_id")
    warnings = (*base_repeats, *head_repeats, *_warnings(base, head))
    return AbstentionComparison(counts, changes, warnings)


def _warnings(base: AbstentionSide, head: AbstentionSide) -> list[str]:
    warnings: list[str] = []
    if base.rule != head.rule:
        warnings.append(f"refusal rule differs: BASE '{base.rule}' vs HEAD '{head.rule}'")
    if base.floors != head.floors:
        warnings.append(
            f"effective vector floors differ: BASE {_floors(base.floors)} vs HEAD "
            f"{_floors(head.floors)}"
        )
    if base.sha256 != head.sha256:
        warnings.append(
            "the must-refuse file differs (sha256 "
            f"{(base.sha256 or 'none')[:12]} vs {(head.sha256 or 'none')[:12]})"
        )
    return warnings


def _floors(floors: tuple[float, ...]) -> str:
    return "[" + ", ".join(f"{value:g}" for value in floors) + "]" if floors else "none"

"""compare's stability verdicts: a case a ``run --repeat`` found noisy is never a regression.

Each side's per-case stability (:class:`StabilitySide`: the ``stability``
blocks of its evaluation.json, or the ``stability_*`` columns of a stored
run's ``cases.parquet``) is joined on case_id. A case matched on both sides
that is unstable on either gets the additive kind ``unstable`` in place of
whatever its first repetitions' values said (improved, regressed or
unchanged): the server answered its query differently within one run, so a
move between two runs is no evidence. Added and removed cases stay what they
are. The header gains a ``stability`` block; a comparison where neither side
carries stability verdicts has neither, and is exactly taguru's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

import polars as pl

from taguru_eval.catalog import (
    STABILITY_BLOCK,
    STABILITY_DIFFERS,
    STABILITY_UNSTABLE,
    repetitions_of,
)
from taguru_eval.compare.model import UNSTABLE

SIDE_SCHEMA: Final = {
    "case_id": pl.String(),
    "repeats": pl.Int64(),
    "unstable": pl.Boolean(),
    "differs": pl.List(pl.String()),
}
"""One row per case of a side with a stability verdict."""

_KEYS: Final = ("repeats", "unstable", "differs")


@dataclass(frozen=True)
class StabilitySide:
    """One run's stability verdicts: ``inputs.repeat`` (None when not an integer
    above 1) and one row per case (:data:`SIDE_SCHEMA`, last occurrence of a
    case_id kept)."""

    repeat: int | None
    cases: pl.DataFrame

    @property
    def unstable(self) -> int:
        """How many of the side's cases are unstable."""
        return int(self.cases.get_column("unstable").fill_null(False).sum())

    def summary(self) -> dict[str, object]:
        """The header's view of the side: its repetitions and unstable cases."""
        repeats = self.repeat
        if repeats is None and self.cases.height:
            repeats = self.cases.get_column("repeats").max()  # type: ignore[assignment]
        return {"repeats": repeats, "unstable": self.unstable}


def side_from_blocks(
    cases: Sequence[tuple[str, Any]], repeat: object = None
) -> StabilitySide | None:
    """A side from its case blocks' ``(case_id, stability)`` pairs, in file order;
    None when no case carries a ``stability`` object. Read leniently, as another
    writer's member of that name could mean something else: only ``"unstable":
    true`` makes a case unstable, and ``differs`` keeps its strings."""
    if not any(isinstance(block, dict) for _, block in cases):
        return None  # every run not given --repeat: nothing more to read
    rows: list[tuple[str, int | None, bool | None, list[str] | None]] = []
    for case_id, block in cases:
        if not isinstance(block, dict):
            rows.append((case_id, None, None, None))  # the last occurrence has none
            continue
        repeats = block.get("repeats")
        differs = block.get("differs")
        rows.append(
            (
                case_id,
                repeats if isinstance(repeats, int) and not isinstance(repeats, bool) else None,
                block.get("unstable") is True,
                [d for d in differs if isinstance(d, str)] if isinstance(differs, list) else [],
            )
        )
    frame = pl.DataFrame(rows, schema=SIDE_SCHEMA, orient="row")
    return StabilitySide(repetitions_of(repeat), _last_with_verdict(frame))


def side_from_columns(frame: pl.DataFrame, repeat: object = None) -> StabilitySide | None:
    """A side from a stored run's ``case_id`` and ``stability_*`` columns (in case
    order); None when no case has a verdict."""
    verdicts = frame.select(
        pl.col("case_id").fill_null(""),
        pl.col(STABILITY_BLOCK).cast(pl.Int64).alias("repeats"),
        pl.when(pl.col(STABILITY_BLOCK).is_not_null())
        .then(pl.col(STABILITY_UNSTABLE).fill_null(False))
        .alias("unstable"),
        pl.col(STABILITY_DIFFERS).alias("differs"),
    )
    if verdicts.get_column("repeats").is_null().all():
        return None
    return StabilitySide(repetitions_of(repeat), _last_with_verdict(verdicts.cast(SIDE_SCHEMA)))  # type: ignore[arg-type]


def _last_with_verdict(frame: pl.DataFrame) -> pl.DataFrame:
    """The last occurrence of each case_id (as compare indexes cases, §6.3), kept
    only when it carries a verdict."""
    last = frame.unique(subset="case_id", keep="last", maintain_order=True)
    return last.filter(pl.col("unstable").is_not_null())


@dataclass(frozen=True)
class StabilityComparison:
    """The header's ``stability`` block and each unstable case's verdicts.

    ``cases``: one row per case classified ``unstable`` (``case_id`` and, per
    side, ``base_*`` / ``head_*`` ``repeats``, ``unstable``, ``differs``; null
    where that side has no verdict), by case_id.
    """

    unstable: int
    base: StabilitySide | None
    head: StabilitySide | None
    cases: pl.DataFrame

    def header_block(self) -> dict[str, object]:
        """``{"unstable": N, "base": {"repeats": R, "unstable": n} | null, "head": …}``."""
        return {
            "unstable": self.unstable,
            "base": None if self.base is None else self.base.summary(),
            "head": None if self.head is None else self.head.summary(),
        }

    def record_members(self) -> dict[str, dict[str, object]]:
        """case_id -> the ``stability`` member of its ``unstable`` record."""
        members: dict[str, dict[str, object]] = {}
        for row in self.cases.iter_rows(named=True):
            members[row["case_id"]] = {
                side: None
                if row[f"{side}_unstable"] is None
                else {key: row[f"{side}_{key}"] for key in _KEYS}
                for side in ("base", "head")
            }
        return members


def _prefixed(side: StabilitySide | None, prefix: str) -> pl.DataFrame:
    frame = pl.DataFrame(schema=SIDE_SCHEMA) if side is None else side.cases
    return frame.rename({key: f"{prefix}_{key}" for key in _KEYS})


def classify_unstable(
    cases: pl.DataFrame, base: StabilitySide | None, head: StabilitySide | None
) -> tuple[pl.DataFrame, StabilityComparison | None]:
    """``cases`` (compare's classified frame) with every matched case unstable on
    either side given the kind ``unstable``, and the comparison's stability
    block; ``cases`` unchanged and None when neither side has verdicts."""
    if base is None and head is None:
        return cases, None
    verdicts = _prefixed(base, "base").join(
        _prefixed(head, "head"), on="case_id", how="full", coalesce=True
    )
    flagged = cases.select("case_id", "in_base", "in_head").join(
        verdicts, on="case_id", how="left", maintain_order="left"
    )
    noisy = (
        pl.col("in_base")
        & pl.col("in_head")
        & (pl.col("base_unstable").fill_null(False) | pl.col("head_unstable").fill_null(False))
    )
    marked = flagged.with_columns(noisy.alias("noisy"))
    classified = cases.with_columns(
        pl.when(marked.get_column("noisy"))
        .then(pl.lit(UNSTABLE))
        .otherwise(pl.col("kind"))
        .alias("kind")
    )
    unstable = marked.filter(pl.col("noisy")).drop("in_base", "in_head", "noisy").sort("case_id")
    return classified, StabilityComparison(unstable.height, base, head, unstable)

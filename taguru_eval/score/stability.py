"""Per-case stability over a run's repetitions (``run --repeat N``).

Every repetition of the eval cases is scored by the same per-case scorer as
the first (:func:`taguru_eval.score.aggregate.case_metrics`); a case is
*unstable* when one of the metrics compare classifies cases by
(:attr:`~taguru_eval.catalog.Catalog.compared`) takes another value in some
repetition than in the first: null on one side only, or apart by more than
:data:`~taguru_eval.catalog.CASE_VALUE_EPSILON` — the difference compare would
call a change. A value is read as compare reads it: only where its block is
written (its :attr:`~taguru_eval.catalog.CaseField.written_when` column).

Only the compared values of each repetition are kept (a few Float64 columns
per case), so 10,000 cases sent three times cost two small frames beside the
run's own.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

import polars as pl

from taguru_eval.catalog import (
    CASE_VALUE_EPSILON,
    STABILITY_BLOCK,
    STABILITY_DIFFERS,
    STABILITY_UNSTABLE,
    Catalog,
)
from taguru_eval.score.stats import ratio

STABILITY_SCHEMA: Final = {
    "case_index": pl.Int32(),
    STABILITY_BLOCK: pl.Int64(),
    STABILITY_UNSTABLE: pl.Boolean(),
    STABILITY_DIFFERS: pl.List(pl.String()),
}
"""One row per eval case: its repetitions, its verdict, the metrics that differed."""


def compared_values(cases: pl.DataFrame, catalog: Catalog) -> pl.DataFrame:
    """``case_index`` plus one Float64 column per compared metric (named after the
    metric), null where compare would read no value."""
    columns = []
    for name in catalog.compared:
        case_field = catalog.per_case[name]
        number = pl.col(case_field.column).cast(pl.Float64).fill_nan(None)
        written = pl.col(case_field.written_when).is_not_null()
        columns.append(pl.when(written).then(number).alias(name))
    return cases.select("case_index", *columns)


def _differs(first: pl.Expr, again: pl.Expr) -> pl.Expr:
    """The same metric of two repetitions is not the same value."""
    one_sided = first.is_null() != again.is_null()
    apart = ((first - again).abs() > CASE_VALUE_EPSILON).fill_null(False)
    return one_sided | apart


def stability(
    first: pl.DataFrame, repeated: Sequence[pl.DataFrame], catalog: Catalog
) -> pl.DataFrame:
    """Each case's verdict (:data:`STABILITY_SCHEMA`, in ``first``'s case order) from
    the ``cases`` frame of the first repetition and those of the others.

    ``differs`` lists the compared metrics, in compare's order, that took another
    value in some repetition; a case is unstable when it is not empty. A case a
    repetition lacks (it was not sent again) differs wherever the first has a value.
    """
    metrics = catalog.compared
    joined = compared_values(first, catalog)
    for again, frame in enumerate(repeated, start=1):
        renamed = compared_values(frame, catalog).rename({m: f"{m}#{again}" for m in metrics})
        joined = joined.join(renamed, on="case_index", how="left", maintain_order="left")
    differs = [
        pl.when(
            pl.any_horizontal(
                [
                    _differs(pl.col(m), pl.col(f"{m}#{again}"))
                    for again in range(1, 1 + len(repeated))
                ]
            )
        )
        .then(pl.lit(m))
        .otherwise(pl.lit(None, dtype=pl.String))
        for m in metrics
    ]
    listed = (
        pl.concat_list(differs).list.drop_nulls()
        if differs
        else pl.lit([], dtype=pl.List(pl.String()))
    )
    return joined.select(
        pl.col("case_index").cast(pl.Int32),
        pl.lit(1 + len(repeated), dtype=pl.Int64).alias(STABILITY_BLOCK),
        listed.alias(STABILITY_DIFFERS),
    ).with_columns((pl.col(STABILITY_DIFFERS).list.len() > 0).alias(STABILITY_UNSTABLE))


def with_stability(cases: pl.DataFrame, verdicts: pl.DataFrame) -> pl.DataFrame:
    """``cases`` with its cases' stability columns (by ``case_index``)."""
    return cases.drop([c for c in STABILITY_SCHEMA if c != "case_index"], strict=False).join(
        verdicts, on="case_index", how="left", maintain_order="left"
    )


def unstable_rate(cases: pl.DataFrame) -> dict[str, Any]:
    """``stability.unstable_rate``: the unstable share of every eval case."""
    unstable = int(cases.select(pl.col(STABILITY_UNSTABLE).fill_null(False).sum()).item())
    return dict(ratio(unstable, cases.height))

"""Answer evidence per case (``--answers``): the answers columns of ``cases``.

Each listed case's verdicts (the ``answer_checks`` table, one row per declared
answer of a case whose first lane completed) become its counts and its three
metric values: ``answers_hit_at_k`` (1.0 when some answer was found),
``answers_mrr`` (1 / the rank of the first answer-bearing hit, 0.0 when none)
and ``answers_coverage`` (found / declared). A listed case whose lane failed
keeps its declared count and has no value: like recall, it is no sample.
"""

from __future__ import annotations

from collections.abc import Mapping

import polars as pl

from taguru_eval.catalog import ANSWERS_BLOCK


def with_answer_columns(
    cases: pl.DataFrame, checks: pl.DataFrame, declared: Mapping[str, int]
) -> pl.DataFrame:
    """``cases`` plus the answers columns (null for a case the answers file does not list)."""
    listed = pl.DataFrame(
        {"case_id": list(declared), ANSWERS_BLOCK: list(declared.values())},
        schema={"case_id": pl.String, ANSWERS_BLOCK: pl.Int64},
    )
    verdicts = checks.group_by("case_index").agg(
        pl.col("found").sum().cast(pl.Int64).alias("answers_found"),
        pl.col("rank").filter(pl.col("found")).min().cast(pl.Int64).alias("answers_first_rank"),
    )
    joined = cases.join(listed, on="case_id", how="left").join(
        verdicts, on="case_index", how="left"
    )
    judged = pl.col(ANSWERS_BLOCK).is_not_null() & pl.col("answers_found").is_not_null()
    found = pl.col("answers_found")
    first = pl.col("answers_first_rank")
    return joined.with_columns(
        pl.when(judged).then((found > 0).cast(pl.Float64)).alias("answers_hit_at_k"),
        pl.when(judged)
        .then(pl.when(first.is_not_null()).then(1.0 / first).otherwise(0.0))
        .alias("answers_mrr"),
        pl.when(judged).then(found / pl.col(ANSWERS_BLOCK)).alias("answers_coverage"),
    )

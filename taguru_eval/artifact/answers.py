"""The case blocks' ``answers`` entries of a run given ``--answers``.

Every case the answers file lists gets one, in this key order::

    "answers": {"hit_at_k": 1.0, "mrr": 0.5, "coverage": 0.5,
                "declared": 2, "found": 1, "first_rank": 2,
                "checks": [{"answer": "twenty days", "found": true, "rank": 2},
                           {"answer": "20 days", "found": false, "rank": null}]}

The three values are the case's ``answers.*`` samples, then the counts, then
one check per declared answer in the file's order. ``answer`` is the user's
own text as the answers file gives it; nothing of what the server served is
written. A case whose first lane failed keeps ``declared`` with every value
``null`` and no checks: it is no sample.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import polars as pl

from taguru_eval.catalog import ANSWERS_BLOCK
from taguru_eval.inputs.answers import AnswerSet


def answers_blocks(
    answers: AnswerSet, cases: pl.DataFrame, checks: pl.DataFrame
) -> dict[str, dict[str, Any]]:
    """``case_id -> {"answers": {…}}`` for every listed case (the artifact's case extras)."""
    verdicts = (
        checks.sort("case_index", "answer_index")
        .group_by("case_index", maintain_order=True)
        .agg(pl.struct("answer_index", "found", "rank").alias("checks"))
    )
    listed = (
        cases.filter(pl.col(ANSWERS_BLOCK).is_not_null())
        .join(verdicts, on="case_index", how="left")
        .select(
            "case_id",
            pl.col("answers_hit_at_k").alias("hit_at_k"),
            pl.col("answers_mrr").alias("mrr"),
            pl.col("answers_coverage").alias("coverage"),
            pl.col(ANSWERS_BLOCK).alias("declared"),
            pl.col("answers_found").alias("found"),
            pl.col("answers_first_rank").alias("first_rank"),
            pl.col("checks").fill_null([]),
        )
    )
    blocks: dict[str, dict[str, Any]] = {}
    for row in listed.iter_rows(named=True):
        # The answer text is the user's own, from the answers file: never the served text.
        case_id = row.pop("case_id")
        texts = answers.by_case.get(case_id, ())
        row["checks"] = [
            {"answer": texts[check["answer_index"]], "found": check["found"], "rank": check["rank"]}
            for check in row["checks"]
            if check["answer_index"] < len(texts)
        ]
        blocks[case_id] = {"answers": row}
    return blocks


def merge_case_extras(
    first: Mapping[str, Mapping[str, Any]], second: Mapping[str, Mapping[str, Any]]
) -> dict[str, dict[str, Any]]:
    """Two sets of case extras as one (a case's members from both, ``first``'s first)."""
    merged = {case_id: dict(members) for case_id, members in first.items()}
    for case_id, members in second.items():
        merged.setdefault(case_id, {}).update(members)
    return merged

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
    verdicts: dict[int, list[tuple[int, bool, int | None]]] = {}
    for case_index, answer_index, found, rank in (
        checks.sort(["case_index", "answer_index"])
        .select("case_index", "answer_index", "found", "rank")
        .iter_rows()
    ):
        verdicts.setdefault(case_index, []).append((answer_index, found, rank))
    blocks: dict[str, dict[str, Any]] = {}
    listed = cases.filter(pl.col(ANSWERS_BLOCK).is_not_null()).select(
        "case_index",
        "case_id",
        "answers_hit_at_k",
        "answers_mrr",
        "answers_coverage",
        ANSWERS_BLOCK,
        "answers_found",
        "answers_first_rank",
    )
    for case_index, case_id, hit, mrr, coverage, declared, found, first in listed.iter_rows():
        texts = answers.by_case.get(case_id, ())
        blocks[case_id] = {
            "answers": {
                "hit_at_k": hit,
                "mrr": mrr,
                "coverage": coverage,
                "declared": declared,
                "found": found,
                "first_rank": first,
                "checks": [
                    {"answer": texts[index], "found": bool(was_found), "rank": rank}
                    for index, was_found, rank in verdicts.get(case_index, [])
                    if index < len(texts)
                ],
            }
        }
    return blocks


def merge_case_extras(
    first: Mapping[str, Mapping[str, Any]], second: Mapping[str, Mapping[str, Any]]
) -> dict[str, dict[str, Any]]:
    """Two sets of case extras as one (a case's members from both, ``first``'s first)."""
    merged = {case_id: dict(members) for case_id, members in first.items()}
    for case_id, members in second.items():
        merged.setdefault(case_id, {}).update(members)
    return merged

"""Per-case stability across a run's repetitions (``run --repeat``): which case is
unstable, and by which compared metrics."""

from __future__ import annotations

from typing import Any

import polars as pl
import pytest

from taguru_eval.catalog import CATALOG, STABILITY_METRICS, catalog_for
from taguru_eval.score.stability import stability, unstable_rate, with_stability
from taguru_eval.tables import conform
from taguru_eval.tables.schemas import CASES

# The cases columns the compared metrics read (and the columns gating their blocks).
_RECALL = ("recall_at_k", "mrr", "ndcg")


def cases(rows: list[dict[str, Any]]) -> pl.DataFrame:
    """A ``cases`` frame: each row gives case_index plus whatever columns it sets."""
    filled = [
        {"run_id": "r", "case_id": f"c{row['case_index']}", "missed": [], **row} for row in rows
    ]
    return conform(pl.DataFrame(filled, infer_schema_length=None), CASES)


def recall_row(index: int, mrr: float | None, *, block: bool = True) -> dict[str, Any]:
    return {
        "case_index": index,
        "recall_expected_total": 1 if block else None,
        **dict.fromkeys(_RECALL, mrr),
    }


def test_a_case_whose_values_agree_is_stable_and_one_that_moves_is_not() -> None:
    first = cases([recall_row(0, 1.0), recall_row(1, 1.0), recall_row(2, 0.5)])
    second = cases([recall_row(0, 1.0), recall_row(1, 0.0), recall_row(2, 0.5)])
    third = cases([recall_row(0, 1.0), recall_row(1, 1.0), recall_row(2, 0.5 + 1e-12)])
    verdicts = stability(first, [second, third], CATALOG)
    assert verdicts.get_column("case_index").to_list() == [0, 1, 2]
    assert verdicts.get_column("stability_repeats").to_list() == [3, 3, 3]
    assert verdicts.get_column("stability_unstable").to_list() == [False, True, False]
    # compare's order of the compared metrics; a move within 1e-9 is no move.
    assert verdicts.get_column("stability_differs").to_list() == [
        [],
        ["recall.recall_at_k", "recall.mrr", "recall.ndcg"],
        [],
    ]


def test_a_value_on_one_repetition_only_differs_and_one_outside_its_block_does_not() -> None:
    first = cases(
        [
            recall_row(0, None, block=False),  # the passage lane failed: no recall block
            recall_row(1, 1.0),
            {"case_index": 2, "diversity_sources": 2},
        ]
    )
    again = cases(
        [
            recall_row(0, 1.0),
            # A value the artifact would not write (no block) reads as none, as compare reads it.
            {**recall_row(1, 1.0), "recall_expected_total": None},
            {"case_index": 2, "diversity_sources": 3},
        ]
    )
    verdicts = stability(first, [again], CATALOG)
    assert verdicts.get_column("stability_differs").to_list() == [
        ["recall.recall_at_k", "recall.mrr", "recall.ndcg"],
        ["recall.recall_at_k", "recall.mrr", "recall.ndcg"],
        ["diversity.sources"],
    ]
    assert verdicts.get_column("stability_repeats").to_list() == [2, 2, 2]


def test_the_answers_metrics_count_when_the_run_has_them() -> None:
    catalog = catalog_for(must_refuse=False, answers=True, stability=True)

    def answered(hit: float) -> pl.DataFrame:
        return cases([{"case_index": 0}]).with_columns(
            pl.lit(1).alias("answers_declared"),
            *[pl.lit(hit).alias(f"answers_{key}") for key in ("hit_at_k", "mrr", "coverage")],
        )

    verdicts = stability(answered(1.0), [answered(0.0)], catalog)
    assert verdicts.get_column("stability_differs").to_list() == [
        ["answers.hit_at_k", "answers.mrr", "answers.coverage"]
    ]


def test_the_rate_is_a_share_of_every_case() -> None:
    first = cases([recall_row(index, 1.0) for index in range(4)])
    again = cases([recall_row(0, 0.0), *(recall_row(index, 1.0) for index in range(1, 4))])
    joined = with_stability(first, stability(first, [again], CATALOG))
    assert joined.height == 4
    assert unstable_rate(joined) == {"value": 0.25, "n": 4, "numerator": 1}
    assert unstable_rate(joined.clear()) == {"value": None, "n": 0, "numerator": None}


def test_the_metric_is_declared_once_and_only_with_the_flag() -> None:
    assert "stability.unstable_rate" not in CATALOG
    with_it = catalog_for(must_refuse=False, answers=False, stability=True)
    assert with_it["stability.unstable_rate"] is STABILITY_METRICS["stability.unstable_rate"]
    definition = with_it.definitions()["stability.unstable_rate"]
    assert definition["statistic"] == "ratio"
    assert definition["scopes"] == ["run"]
    # Not a per-case metric: compare classifies by exactly what it did before.
    assert with_it.compared == CATALOG.compared
    with pytest.raises(KeyError):
        catalog_for(must_refuse=True, answers=True)["stability.unstable_rate"]

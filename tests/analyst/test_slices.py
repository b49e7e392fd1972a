"""Per-tag slices: where tags come from, and the main metrics per tag."""

from __future__ import annotations

import polars as pl
import pytest

from taguru_eval.analyst import slices
from taguru_eval.catalog import COMPARISON_METRICS
from taguru_eval.compare.classify import classify_cases


def _cases() -> pl.DataFrame:
    return pl.DataFrame(
        {
            "case_id": ["a", "b", "c", "d"],
            "recall_at_k": [1.0, 0.5, 0.0, None],
            "mrr": [1.0, 0.5, 0.0, 1.0],
        }
    )


def _tags() -> pl.DataFrame:
    return pl.DataFrame(
        {"case_id": ["a", "b", "c", "d"], "tags": [["rice"], ["rice", "law"], [], ["law"]]},
        schema={"case_id": pl.String, "tags": pl.List(pl.String)},
    )


def test_tag_slices_average_over_the_cases_that_computed_the_metric() -> None:
    frame = slices.tag_slices(_cases(), _tags(), ["recall.recall_at_k", "recall.mrr"])
    assert frame.rows() == [
        ("(all cases)", 4, 0.5, 0.625),
        ("law", 2, 0.5, 0.75),
        ("rice", 2, 0.75, 0.75),
        ("(no tag)", 1, 0.0, 0.0),
    ]


def test_case_tags_are_none_when_the_run_recorded_none() -> None:
    lanes = pl.DataFrame(
        {"case_id": ["a"], "tags": [None]},
        schema={"case_id": pl.String, "tags": pl.List(pl.String)},
    )
    assert slices.case_tags(lanes) is None
    assert slices.case_tags(lanes.drop("tags")) is None
    recorded = slices.case_tags(lanes.with_columns(pl.lit(["x"]).alias("tags")))
    assert recorded is not None and recorded.get_column("tags").to_list() == [["x"]]


def test_tag_slice_changes_show_which_slice_regressed() -> None:
    def side(recall: list[float | None]) -> pl.DataFrame:
        columns = {"case_id": ["a", "b", "c", "d"]} | {
            metric: [None] * 4 for metric in COMPARISON_METRICS
        }
        columns["recall.recall_at_k"] = recall
        return pl.DataFrame(
            columns,
            schema={"case_id": pl.String, **dict.fromkeys(COMPARISON_METRICS, pl.Float64)},
        )

    cases = classify_cases(side([1.0, 1.0, 0.0, 1.0]), side([1.0, 0.0, 0.0, 0.5]))
    changes = slices.tag_slice_changes(cases, _tags())
    rows = {(row[0], row[2]): row for row in changes.rows()}
    # law: b 1 -> 0, d 1 -> 0.5: mean 1.0 -> 0.25, the biggest regression, listed first.
    assert changes.row(0)[0] == "law"
    law = rows[("law", "recall.recall_at_k")]
    assert law[3:6] == pytest.approx((1.0, 0.25, -0.75))
    assert law[6] == "worse"  # a description: the slices are not tested
    assert rows[("rice", "recall.recall_at_k")][1] == 2
    # The untagged case c did not move: its slice is not listed.
    assert ("(no tag)", "recall.recall_at_k") not in rows

"""Which tag slices a case belongs to: the cases' ``options.tags``, as a run recorded them.

An evaluation.json does not record tags; a run made by taguru_eval keeps each
case's tags in the run store's ``case_lanes.tags``, which is where these
frames take them from. A case with several tags is in each of its slices; a
case with none is in ``(no tag)``. The report's per-tag slices
(:mod:`taguru_eval.analyst.slices`) and ``compare --by-tag`` read slices the
same way, so a slice holds the same cases in both.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Final

import polars as pl

from taguru_eval.errors import InputError
from taguru_eval.store import PARQUET_FAILURES, first_line, table_error
from taguru_eval.tables.schemas import TABLE

ALL_CASES: Final = "(all cases)"
NO_TAG: Final = "(no tag)"
CASE_LANES_FILE: Final = TABLE["case_lanes"].file_name


def case_tags(case_lanes: pl.DataFrame) -> pl.DataFrame | None:
    """``case_id``, ``tags`` of a run, or None when the run recorded no tags at all
    (no ``tags`` column, or every value null: an imported evaluation.json)."""
    if "tags" not in case_lanes.columns or case_lanes.get_column("tags").null_count() == len(
        case_lanes
    ):
        return None
    return case_lanes.select("case_id", pl.col("tags").cast(pl.List(pl.String)))


def tag_membership(tags: pl.DataFrame, *, all_cases: bool = True) -> pl.DataFrame:
    """``case_id``, ``tag``: one row per (case, tag), untagged cases under :data:`NO_TAG`;
    with ``all_cases``, every case once more under :data:`ALL_CASES`, first."""
    tagged = (
        tags.select(
            "case_id",
            pl.when(pl.col("tags").list.len() > 0)
            .then(pl.col("tags"))
            .otherwise(pl.lit([NO_TAG]))
            .alias("tag"),
        )
        .explode("tag")
        .unique(maintain_order=True)
    )
    if not all_cases:
        return tagged
    every = tags.select("case_id", pl.lit(ALL_CASES).alias("tag"))
    return pl.concat([every, tagged])


def slice_rank() -> pl.Expr:
    """Sort key of a ``tag`` column: :data:`ALL_CASES` first, :data:`NO_TAG` last."""
    return (
        pl.when(pl.col("tag") == ALL_CASES)
        .then(0)
        .when(pl.col("tag") == NO_TAG)
        .then(2)
        .otherwise(1)
    )


def stored_case_tags(source: str | os.PathLike[str], side: str) -> pl.DataFrame:
    """The case tags of one side of a comparison given as a stored run directory.

    ``InputError`` (exit 2), naming ``side`` and the path, when ``source`` is
    not a directory holding ``case_lanes.parquet``, when the table cannot be
    read, or when the run recorded no tags (a run imported from an
    evaluation.json).
    """
    given = os.fspath(source)
    path = Path(given) / CASE_LANES_FILE
    if not path.is_file():
        raise InputError(
            f"--by-tag: {side} {given} is not a stored run directory with {CASE_LANES_FILE} "
            "(an evaluation.json does not record the cases' tags; pass the run's directory "
            "runs/context=<ctx>/run=<id>/)",
            path=given,
        )
    shown = os.path.join(given, CASE_LANES_FILE)
    try:
        lanes = pl.read_parquet(path, columns=["case_id", "tags"])
    except pl.exceptions.ColumnNotFoundError as exc:
        raise table_error(shown, f"missing column {first_line(exc)}") from None
    except PARQUET_FAILURES as exc:
        raise table_error(shown, first_line(exc)) from None
    if lanes.schema["case_id"] != pl.String or not isinstance(lanes.schema["tags"], pl.List):
        raise table_error(shown, "case_id must be a string column and tags a list column")
    tags = case_tags(lanes)
    if tags is None:
        raise InputError(
            f"--by-tag: {side} {given} recorded no case tags (a run imported from an "
            "evaluation.json does not carry options.tags)",
            path=given,
        )
    # The last row of a repeated case_id wins, as compare keeps its last values.
    return tags.unique(subset="case_id", keep="last", maintain_order=True)

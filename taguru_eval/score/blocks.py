"""The per-case coverage, citation and missed blocks (EVALUATE.md §4.5–§4.8)."""

from __future__ import annotations

import polars as pl

from taguru_eval._base.normalize import normalize_entry

MISSED_CAP = 3

POSITIONS = ("subject", "label", "object")


def _normalized(column: str) -> pl.Expr:
    """``normalize_entry`` of a string column (folded once per distinct value)."""

    def fold(series: pl.Series) -> pl.Series:
        distinct = series.unique().drop_nulls().to_list()
        mapping = {value: normalize_entry(value) for value in distinct}
        return series.replace_strict(mapping, default=None, return_dtype=pl.String)

    return pl.col(column).map_batches(fold, return_dtype=pl.String)


def citation_is_valid() -> pl.Expr:
    """EVALUATE.md §3.6: resolved, section not mismatched, any declared quote matched."""
    return (
        (pl.col("outcome") == "resolved")
        & (pl.col("section_check").fill_null("") != "mismatched")
        & (pl.col("quote_declared").is_null() | pl.col("quote_matched").fill_null(False))
    )


def _entry_matches(expected: pl.DataFrame, resolutions: pl.DataFrame) -> pl.DataFrame:
    """Concept and label entries with ``matched`` (§4.3: equal after normalize_entry)."""
    names = (
        resolutions.filter(pl.col("name").is_not_null())
        .select("case_index", "kind", _normalized("name").alias("key"))
        .unique()
        .with_columns(pl.lit(True).alias("matched"))
    )
    entries = expected.filter(pl.col("kind").is_in(["concept", "label"])).with_columns(
        _normalized("text").alias("key")
    )
    return (
        entries.join(names, on=["case_index", "kind", "key"], how="left")
        .with_columns(pl.col("matched").fill_null(False))
        .sort(["case_index", "kind", "entry_index"])
    )


def _coverage_blocks(
    entries: pl.DataFrame, expected: pl.DataFrame, probes: pl.DataFrame
) -> pl.DataFrame:
    """Per case: concepts/labels/associations ``expected``/``matched``/value (§4.3, §4.4)."""
    counts = entries.group_by(["case_index", "kind"]).agg(
        pl.len().cast(pl.Int64).alias("expected"),
        pl.col("matched").sum().cast(pl.Int64).alias("matched"),
    )
    declared_associations = (
        expected.filter(pl.col("kind") == "association")
        .group_by("case_index")
        .agg(pl.len().cast(pl.Int64).alias("expected"))
    )
    covered = probes.group_by("case_index").agg(
        ((pl.col("query_outcome") == "queried") & (pl.col("query_total") >= 1))
        .sum()
        .cast(pl.Int64)
        .alias("matched"),
    )
    associations = (
        declared_associations.join(covered, on="case_index", how="left")
        .with_columns(pl.col("matched").fill_null(0), pl.lit("association").alias("kind"))
        .select("case_index", "kind", "expected", "matched")
    )
    blocks = pl.concat([counts.select(associations.columns), associations]).with_columns(
        (pl.col("matched") / pl.col("expected")).alias("value")
    )
    wide = None
    for kind, name in (
        ("concept", "concepts"),
        ("label", "labels"),
        ("association", "associations"),
    ):
        part = blocks.filter(pl.col("kind") == kind).select(
            "case_index",
            pl.col("expected").alias(f"coverage_{name}_expected"),
            pl.col("matched").alias(f"coverage_{name}_matched"),
            pl.col("value").alias(f"coverage_{name}"),
        )
        wide = part if wide is None else wide.join(part, on="case_index", how="full", coalesce=True)
    assert wide is not None
    return wide


def _citation_blocks(expected: pl.DataFrame, checks: pl.DataFrame) -> pl.DataFrame:
    """Per case declaring citations: recall (served) and validity, never merged (§4.5)."""
    declared = expected.filter(pl.col("kind") == "citation").select("case_index").unique()
    per_case = checks.group_by("case_index").agg(
        pl.len().cast(pl.Int64).alias("citations_expected_total"),
        pl.col("served").sum().cast(pl.Int64).alias("citations_matched"),
        citation_is_valid().sum().cast(pl.Int64).alias("citations_valid"),
    )
    return (
        declared.join(per_case, on="case_index", how="left")
        .with_columns(
            pl.col("citations_expected_total").fill_null(0),
            pl.col("citations_matched").fill_null(0),
            pl.col("citations_valid").fill_null(0),
        )
        .with_columns(
            (pl.col("citations_matched") / pl.col("citations_expected_total")).alias(
                "citations_recall"
            ),
            (pl.col("citations_valid") / pl.col("citations_expected_total")).alias(
                "citations_locator_validity"
            ),
        )
    )


def _association_why() -> pl.Expr:
    """The §4.7 reason an association probe is not covered."""
    errored_positions = pl.concat_list(
        [
            pl.when(pl.col(f"{position}_outcome") == "errored").then(
                pl.format("{}: {}", pl.lit(position), pl.col(f"{position}_message"))
            )
            for position in POSITIONS
        ]
    ).list.drop_nulls()
    any_errored = pl.any_horizontal(
        [pl.col(f"{position}_outcome") == "errored" for position in POSITIONS]
    )
    return (
        pl.when((pl.col("query_outcome") == "queried") & (pl.col("query_total") == 0))
        .then(pl.lit("query returned no association"))
        .when(pl.col("query_outcome") == "errored")
        .then(pl.lit("query errored"))
        .when(pl.col("query_outcome").is_null() & any_errored)
        .then(
            pl.lit("a position could not be resolved due to a transport error: ")
            + errored_positions.list.join("; ")
        )
        .otherwise(pl.lit("query never ran (a position did not pin)"))
    )


_MISSED_COLUMNS = ["case_index", "group", "item", "sub", "text"]


def _missed_rows(
    items: pl.DataFrame, entries: pl.DataFrame, probes: pl.DataFrame, checks: pl.DataFrame
) -> pl.DataFrame:
    """Every missed[] entry of every case, with its §4.7 ordering keys."""

    def keyed(frame: pl.DataFrame, group: int, item: str, sub: int, text: pl.Expr) -> pl.DataFrame:
        return frame.select(
            pl.col("case_index"),
            pl.lit(group, dtype=pl.Int32).alias("group"),
            pl.col(item).cast(pl.Int32).alias("item"),
            pl.lit(sub, dtype=pl.Int32).alias("sub"),
            text.alias("text"),
        )

    sources = keyed(
        items.filter(pl.col("first_rank").is_null()),
        1,
        "entry_index",
        0,
        pl.format("expected_sources: '{}' not found among passage hits", pl.col("source")),
    )
    unmatched = entries.filter(~pl.col("matched"))
    concepts = keyed(
        unmatched.filter(pl.col("kind") == "concept"),
        2,
        "entry_index",
        0,
        pl.format("expected_concepts: '{}' not resolved", pl.col("text")),
    )
    labels = keyed(
        unmatched.filter(pl.col("kind") == "label"),
        3,
        "entry_index",
        0,
        pl.format("expected_labels: '{}' not resolved", pl.col("text")),
    )
    associations = keyed(
        probes.filter(
            ~((pl.col("query_outcome") == "queried") & (pl.col("query_total") >= 1)).fill_null(
                False
            )
        ),
        4,
        "association_index",
        0,
        pl.format(
            "expected_associations: ({}, {}, {}) ",
            pl.col("subject_cue"),
            pl.col("label_cue"),
            pl.col("object_cue"),
        )
        + _association_why(),
    )
    locator = pl.format("expected_citations: ({}, {}) ", pl.col("source"), pl.col("paragraph"))
    unserved = keyed(
        checks.filter(~pl.col("served")),
        5,
        "citation_index",
        0,
        locator + pl.lit("not found among served results"),
    )
    invalid = keyed(
        checks.filter(~citation_is_valid()),
        5,
        "citation_index",
        1,
        locator + pl.lit("failed locator validity"),
    )
    return pl.concat([sources, concepts, labels, associations, unserved, invalid])


def _missed_lists(rows: pl.DataFrame) -> pl.DataFrame:
    return (
        rows.sort(["case_index", "group", "item", "sub"])
        .group_by("case_index", maintain_order=True)
        .agg(pl.col("text").alias("all_missed"))
        .select(
            "case_index",
            pl.col("all_missed").list.head(MISSED_CAP).alias("missed"),
            (pl.col("all_missed").list.len().cast(pl.Int64) - MISSED_CAP)
            .clip(lower_bound=0)
            .alias("missed_truncated"),
        )
    )

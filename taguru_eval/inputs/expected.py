"""The ``expected`` table of a loaded eval set, and Steps E–F's value rules over it.

:attr:`~.evalcase.EvalSet.expected` is a Polars frame with one row per expected
item, so that matching expectations to what the server returned is a join (its
schema is :data:`taguru_eval.tables.schemas.EXPECTED`, keyed like the run tables):

==================  ==========  ==========================================================
column              dtype       meaning
==================  ==========  ==========================================================
case_id             String      the case's id (exactly as written)
case_index          Int32       0-based position of the case in the file
kind                String      ``source`` | ``concept`` | ``label`` | ``association`` |
                                ``citation``
entry_index         Int32       index of the declaring entry in its list
                                (``expected_sources[i]``, ``expected_concepts[i]`` …)
item_index          Int32       0-based row number within (case, kind)
source              String      ``source`` and ``citation`` rows; else null
paragraph           Int64       ``source`` rows: one listed paragraph, or null when the
                                entry lists none (any paragraph of the source matches);
                                ``citation`` rows: the cited paragraph; else null
relevance           Int64       ``source`` rows only (0..=3); else null
text                String      ``concept`` / ``label`` rows: the entry as written
subject             String      ``association`` rows only
label               String      ``association`` rows only
object              String      ``association`` rows only
section_declared    Boolean     ``citation`` rows: whether the ``section`` key was present
section             String      ``citation`` rows: the declared section; null when absent
                                *or* declared null — tell them apart with section_declared
quote               String      ``citation`` rows: the declared quote, or null
==================  ==========  ==========================================================

An ``expected_sources`` entry with ``paragraphs: [2, 5]`` becomes two rows
sharing one ``entry_index`` (recall counts one judged item per entry, §4.2, so
scoring groups by ``entry_index``); a paragraph listed twice in one entry
yields one row (matching is set membership, §4.1). Rows are ordered by case,
then kind in the order above, then declaration order.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import chain
from operator import attrgetter
from typing import Any, Final, NamedTuple, TypeVar

import polars as pl

from taguru_eval._base.text import WHITE_SPACE
from taguru_eval.inputs.evalcase import (
    ABSENT,
    EvalCase,
    ExpectedAssociation,
    ExpectedCitation,
    ExpectedSource,
)
from taguru_eval.tables.schemas import EXPECTED as EXPECTED_SCHEMA

EXPECTED_KINDS: Final = ("source", "concept", "label", "association", "citation")

Entry = TypeVar("Entry")


class ExpectationLists(NamedTuple):
    """Every case's declared lists, one list per field, in file order: what the
    table is built from (the loader gathers them while it decodes)."""

    case_ids: list[str]
    sources: list[tuple[ExpectedSource, ...]]
    concepts: list[tuple[str, ...]]
    labels: list[tuple[str, ...]]
    associations: list[tuple[ExpectedAssociation, ...]]
    citations: list[tuple[ExpectedCitation, ...]]

    @classmethod
    def of(cls, cases: Sequence[EvalCase]) -> ExpectationLists:
        """The lists of loaded ``cases``."""

        def lists(name: str) -> list[Any]:
            return list(map(attrgetter(name), cases))

        return cls(
            lists("case_id"),
            lists("expected_sources"),
            lists("expected_concepts"),
            lists("expected_labels"),
            lists("expected_associations"),
            lists("expected_citations"),
        )


def expected_frame(cases: Sequence[EvalCase]) -> pl.DataFrame:
    """The ``expected`` table of the module docstring for loaded ``cases``."""
    return expected_table(ExpectationLists.of(cases))


def expected_table(lists: ExpectationLists) -> pl.DataFrame:
    """The ``expected`` table of the cases whose lists are ``lists``.

    Each kind's entries are gathered into columns (one C-level getter per
    column, never a dict per row); Polars puts the rows in file order.
    """
    parts = (
        _source_rows(lists.sources),
        _text_rows(lists.concepts),
        _text_rows(lists.labels),
        _association_rows(lists.associations),
        _citation_rows(lists.citations),
    )
    rows = sum(part.height for part in parts)
    case_ids = pl.Series(lists.case_ids, dtype=pl.String)
    # One lazy plan rather than eager steps: Polars then fuses the concatenation,
    # the sort, the gathers and the casts instead of materializing each of them.
    frame = pl.concat(
        [
            part.lazy().with_columns(kind_rank=pl.lit(rank, pl.UInt8))
            for rank, part in enumerate(parts)
        ],
        how="diagonal_relaxed",
    )
    frame = frame.sort(_file_order(rows, len(case_ids))).with_columns(
        case_id=pl.lit(case_ids).gather(pl.col("case_index")),
        kind=pl.col("kind_rank").replace_strict(
            dict(enumerate(EXPECTED_KINDS)), return_dtype=pl.String
        ),
    )
    return frame.select(
        pl.col(name).cast(dtype) for name, dtype in EXPECTED_SCHEMA.items()
    ).collect()


def _file_order(rows: int, cases: int) -> list[pl.Expr]:
    """Case first, then kind, then declaration: each kind's rows arrive in case order,
    declaration order within a case, so their position breaks every tie."""
    group = pl.col("case_index").cast(pl.UInt64) * len(EXPECTED_KINDS) + pl.col("kind_rank")
    position = pl.int_range(pl.len(), dtype=pl.UInt64)
    if cases * len(EXPECTED_KINDS) * max(rows, 1) < 1 << 63:
        # One distinct key per row, so no stable sort is needed (a slower one).
        return [group * pl.len().cast(pl.UInt64) + position]
    return [group, position]


def _flatten(lists: Sequence[Sequence[Entry]]) -> tuple[pl.DataFrame, list[Entry]]:
    """Every entry of every case's list: (case_index, entry_index, item_index) rows,
    and the entries."""
    counts = pl.Series("count", list(map(len, lists)), dtype=pl.UInt32)
    index = (
        counts.to_frame()
        .with_row_index("case_index")
        .select(
            pl.col("case_index").repeat_by("count").explode(),
            pl.int_ranges(0, "count", dtype=pl.UInt32).explode().alias("entry_index"),
        )
        .drop_nulls()
        .with_columns(item_index=pl.col("entry_index"))
    )
    return index, list(chain.from_iterable(lists))


def _fields(entries: Sequence[object], names: tuple[str, ...]) -> list[list[Any]]:
    """The columns ``names`` over ``entries``, each read by a C-level getter."""
    return [list(map(attrgetter(name), entries)) for name in names]


def _source_rows(lists: Sequence[Sequence[ExpectedSource]]) -> pl.DataFrame:
    index, entries = _flatten(lists)
    source, relevance, listed = _fields(entries, ("source", "relevance", "paragraphs"))
    frame = index.with_columns(
        source=pl.Series(source, dtype=pl.String),
        relevance=pl.Series(relevance, dtype=pl.UInt8),
    )
    # A paragraph listed twice in one entry is one row (matching is set membership).
    listed = [
        tuple(dict.fromkeys(paragraphs)) if len(paragraphs) > 1 else paragraphs
        for paragraphs in listed
    ]
    # Entry i spans max(1, len(paragraphs)) rows.
    spans = pl.Series(list(map(len, listed)), dtype=pl.UInt32).clip(lower_bound=1)
    rows = frame.select(pl.all().repeat_by(spans).explode()) if len(frame) else frame
    paragraph = [p for paragraphs in listed for p in (paragraphs or (None,))]
    rows = rows.with_columns(paragraph=pl.Series(paragraph, dtype=pl.UInt32))
    # Source rows are numbered per case, not per entry: a case's rows are adjacent.
    position = pl.int_range(pl.len(), dtype=pl.UInt32)
    case = pl.col("case_index")
    first = pl.when(case.ne_missing(case.shift(1))).then(position)
    return rows.with_columns(item_index=position - first.forward_fill())


def _text_rows(lists: Sequence[Sequence[str]]) -> pl.DataFrame:
    index, texts = _flatten(lists)
    return index.with_columns(text=pl.Series(texts, dtype=pl.String))


_ASSOCIATION_PARTS: Final = ("subject", "label", "object")


def _association_rows(lists: Sequence[Sequence[ExpectedAssociation]]) -> pl.DataFrame:
    index, entries = _flatten(lists)
    columns = _fields(entries, _ASSOCIATION_PARTS)
    return index.with_columns(
        pl.Series(part, values, dtype=pl.String)
        for part, values in zip(_ASSOCIATION_PARTS, columns, strict=True)
    )


def _citation_rows(lists: Sequence[Sequence[ExpectedCitation]]) -> pl.DataFrame:
    index, entries = _flatten(lists)
    source, paragraph, section, quote = _fields(
        entries, ("source", "paragraph", "section", "quote")
    )
    return index.with_columns(
        source=pl.Series(source, dtype=pl.String),
        paragraph=pl.Series(paragraph, dtype=pl.UInt32),
        section_declared=pl.Series([s is not ABSENT for s in section], dtype=pl.Boolean),
        section=pl.Series([None if s is ABSENT else s for s in section], dtype=pl.String),
        quote=pl.Series(quote, dtype=pl.String),
    )


# --------------------------------------------------------------------------- value rules


def _trims_to_empty(column: str) -> pl.Expr:
    """Trims to empty under Rust's ``str::trim`` (null stays null)."""
    return pl.col(column).str.strip_chars_start(WHITE_SPACE).str.len_bytes() == 0


def breaks_a_value_rule(expected: pl.DataFrame) -> bool:
    """Whether the ``expected`` table breaks one of Steps E–F's value rules.

    Step E: a source trims to empty, relevance above 3; Step F: an
    expected_labels entry, an association part, a citation source or a
    present quote trims to empty. Concepts and tags have no such rule. The
    loader asks; the strict reader words the failure.
    """
    broken = (
        (pl.col("relevance") > 3)
        | _trims_to_empty("source")
        | (_trims_to_empty("text") & (pl.col("kind") == "label"))
        | _trims_to_empty("subject")
        | _trims_to_empty("label")
        | _trims_to_empty("object")
        | _trims_to_empty("quote")
    )
    return bool(expected.select(broken.any()).item())

"""The loaded eval set: case types, the ``expected`` table built from them (EVALUATE.md §1.6).

Both eval.jsonl loaders produce these types: the strict one builds them field
by field, the fast one has msgspec decode case lines straight into them
(:class:`EvalCase`, :class:`CaseOptions` and the entry types are their own
closed-object wire shapes), so the two paths cannot drift apart in what a
loaded case is.

The ``expected`` table
----------------------
:attr:`EvalSet.expected` is a Polars frame with one row per expected item, so
that matching expectations to what the server returned is a join (its schema
is :data:`taguru_eval.tables.schemas.EXPECTED`, keyed like the run tables):

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
from dataclasses import dataclass
from itertools import chain
from operator import attrgetter
from typing import Annotated, Any, Final, TypeVar

import msgspec
import polars as pl

from taguru_eval._base.jsonstrict import U8_MAX, U32_MAX
from taguru_eval._base.text import WHITE_SPACE
from taguru_eval.contract import DEFAULT_LIMIT
from taguru_eval.tables.schemas import EXPECTED as EXPECTED_SCHEMA

U8 = Annotated[int, msgspec.Meta(ge=0, le=U8_MAX)]
U32 = Annotated[int, msgspec.Meta(ge=0, le=U32_MAX)]
U64 = Annotated[int, msgspec.Meta(ge=0)]
"""Non-negative; msgspec cannot bound above i64, so the fast loader checks the u64 ceiling."""
NotOnTheWire = Annotated[int, msgspec.Meta(ge=1, le=0)]
"""A field no JSON value can decode into (no integer is both >= 1 and <= 0): a case line
naming it fails decoding, as the unknown key it is, while the loaders set it themselves."""

Absent = msgspec.UnsetType
"""The type of :data:`ABSENT` (``isinstance(section, Absent)``)."""

ABSENT: Final = msgspec.UNSET
"""An expected citation's ``section`` when the key is absent (do not check).

msgspec's own "field not given" marker, so the fast loader keeps absent and
``null`` apart while decoding."""

SectionExpectation = str | None | Absent
"""``ABSENT`` = not checked; ``None`` = outside every section; ``str`` = exactly this."""


class ExpectedSource(msgspec.Struct, frozen=True, forbid_unknown_fields=True, gc=False):
    """One ``expected_sources`` entry; empty ``paragraphs`` = any paragraph."""

    source: str
    paragraphs: tuple[U32, ...] = ()
    relevance: U8 = 1


class ExpectedAssociation(msgspec.Struct, frozen=True, forbid_unknown_fields=True, gc=False):
    """One ``expected_associations`` entry."""

    subject: str
    label: str
    object: str


class ExpectedCitation(msgspec.Struct, frozen=True, forbid_unknown_fields=True, gc=False):
    """One ``expected_citations`` entry (``section`` is three-valued)."""

    source: str
    paragraph: U32
    section: SectionExpectation = ABSENT
    quote: str | None = None

    @property
    def section_declared(self) -> bool:
        return self.section is not ABSENT


class CaseOptions(msgspec.Struct, frozen=True, forbid_unknown_fields=True, gc=False):
    """A case's ``options`` (``limit`` range-checked later by validate_limits).

    As decoded, ``floor`` is still binary64 and the u64 ceilings unchecked:
    the fast loader finishes both (Step F)."""

    limit: U64 | None = None
    floor: float | None = None
    tags: tuple[str, ...] = ()
    since: U64 | None = None
    until: U64 | None = None

    @property
    def effective_limit(self) -> int:
        """``options.limit`` if present, else the default 10 (§1.5)."""
        return DEFAULT_LIMIT if self.limit is None else self.limit


class EvalCase(msgspec.Struct, frozen=True, forbid_unknown_fields=True, gc=False):
    """One loaded case (EVALUATE.md §1.6); ``line`` is its 1-based file line.

    The fast loader decodes a case line straight into it and then sets
    ``line`` (a key of that name in the file fails decoding, see
    :data:`NotOnTheWire`)."""

    case_id: str
    query: str
    line: NotOnTheWire = 0
    cues: tuple[str, ...] = ()
    expected_sources: tuple[ExpectedSource, ...] = ()
    expected_concepts: tuple[str, ...] = ()
    expected_labels: tuple[str, ...] = ()
    expected_associations: tuple[ExpectedAssociation, ...] = ()
    expected_citations: tuple[ExpectedCitation, ...] = ()
    options: CaseOptions = CaseOptions()

    @property
    def declares_source_expectation(self) -> bool:
        """At least one expected source with relevance >= 1."""
        return any(entry.relevance >= 1 for entry in self.expected_sources)

    @property
    def has_expectations(self) -> bool:
        """Any expected_sources or expected_concepts entry (the reference's notion)."""
        return bool(self.expected_sources or self.expected_concepts)

    @property
    def runs_structural_lane(self) -> bool:
        return bool(self.expected_concepts or self.expected_labels or self.expected_associations)

    @property
    def runs_citation_lane(self) -> bool:
        return bool(self.expected_citations)

    @property
    def effective_limit(self) -> int:
        return self.options.effective_limit


EXPECTED_KINDS: Final = ("source", "concept", "label", "association", "citation")


@dataclass(frozen=True, eq=False)
class EvalSet:
    """A loaded eval.jsonl: header name, cases in file order, the expected table.

    ``label`` is the ``--eval`` argument as given (``inputs.eval.path``);
    ``name`` the header's name (``inputs.eval.name``). Compared by identity:
    a DataFrame has no boolean equality.
    """

    label: str
    name: str | None
    cases: list[EvalCase]
    expected: pl.DataFrame
    warnings: tuple[str, ...] = ()

    @property
    def case_ids(self) -> list[str]:
        return [case.case_id for case in self.cases]


# --------------------------------------------------------------------------- expected table

Entry = TypeVar("Entry")


def expected_frame(cases: Sequence[EvalCase]) -> pl.DataFrame:
    """The ``expected`` table of the module docstring for loaded ``cases``.

    Each kind's entries are gathered into columns (one C-level getter per
    column, never a dict per row); Polars numbers and orders them.
    """

    def lists(name: str) -> list[Any]:
        return list(map(attrgetter(name), cases))

    entries = {
        "source": _source_entries(lists("expected_sources")),
        "concept": _text_entries(lists("expected_concepts")),
        "label": _text_entries(lists("expected_labels")),
        "association": _association_entries(lists("expected_associations")),
        "citation": _citation_entries(lists("expected_citations")),
    }
    rows = sum(frame.height for frame in entries.values())
    lazy = {kind: frame.lazy() for kind, frame in entries.items()}
    case_ids = pl.Series("case_id", lists("case_id"), dtype=pl.String)
    return assemble(lazy, case_ids, rows).collect()


def assemble(entries: dict[str, pl.LazyFrame], case_ids: pl.Series, max_rows: int) -> pl.LazyFrame:
    """The table from each kind's entry rows (``case_index``, ``entry_index``, values).

    Shared by the object builder (:func:`expected_frame`) and Arrow's reading
    of the file (:mod:`.expected_arrow`), so both number and order alike.
    ``max_rows`` bounds the number of rows (it sizes the sort key).

    A source entry arrives as one row per distinct listed paragraph (null
    when it lists none: any paragraph matches), so a paragraph listed twice
    in one entry is one row; source rows are numbered per case. Rows are
    ordered by case, then kind, then declaration.

    A plan, not a frame: the Arrow reader builds it on a thread of its own
    while the main thread decodes, and each eager step would wait for the
    interpreter lock (milliseconds a time) to hand back its result.
    """
    parts = []
    for rank, kind in enumerate(EXPECTED_KINDS):
        frame = entries[kind].with_columns(
            kind_rank=pl.lit(rank, pl.UInt8), item_index=pl.col("entry_index")
        )
        if kind == "source":
            frame = _numbered_sources(frame)
        parts.append(frame)
    frame = pl.concat(parts, how="diagonal_relaxed")
    frame = frame.sort(_file_order(max_rows, len(case_ids)))
    frame = frame.with_columns(
        case_id=pl.lit(case_ids).gather(pl.col("case_index")),
        kind=pl.col("kind_rank").replace_strict(
            dict(enumerate(EXPECTED_KINDS)), return_dtype=pl.String
        ),
    )
    # Every kind's columns are in the concatenation (a kind without rows still names
    # them), so the plan needs no schema resolved here (that would wait for the lock).
    return frame.select(pl.col(name).cast(dtype) for name, dtype in EXPECTED_SCHEMA.items())


def _numbered_sources(frame: pl.LazyFrame) -> pl.LazyFrame:
    """Source rows numbered per case (a case's rows are adjacent)."""
    position = pl.int_range(pl.len(), dtype=pl.UInt32)
    case = pl.col("case_index")
    first = pl.when(case.ne_missing(case.shift(1))).then(position)
    return frame.with_columns(item_index=position - first.forward_fill())


def _file_order(max_rows: int, cases: int) -> list[pl.Expr]:
    """Case first, then kind, then declaration: each kind's rows arrive in case order,
    declaration order within a case, so their position breaks every tie."""
    group = pl.col("case_index").cast(pl.UInt64) * len(EXPECTED_KINDS) + pl.col("kind_rank")
    position = pl.int_range(pl.len(), dtype=pl.UInt64)
    if cases * len(EXPECTED_KINDS) * max(max_rows, 1) < 1 << 63:
        # One distinct key per row: no stable sort needed (it took twice as long).
        return [group * pl.len().cast(pl.UInt64) + position]
    return [group, position]


def _flatten(lists: Sequence[Sequence[Entry]]) -> tuple[pl.DataFrame, list[Entry]]:
    """Every entry of every case's list: (case_index, entry_index) rows, and the entries."""
    counts = pl.Series("count", list(map(len, lists)), dtype=pl.UInt32)
    index = (
        counts.to_frame()
        .with_row_index("case_index")
        .select(
            pl.col("case_index").repeat_by("count").explode(),
            pl.int_ranges(0, "count", dtype=pl.UInt32).explode().alias("entry_index"),
        )
        .drop_nulls()
    )
    return index, list(chain.from_iterable(lists))


def _fields(entries: Sequence[object], names: tuple[str, ...]) -> list[list[Any]]:
    """The columns ``names`` over ``entries``, each read by a C-level getter."""
    return [list(map(attrgetter(name), entries)) for name in names]


def _source_entries(lists: Sequence[Sequence[ExpectedSource]]) -> pl.DataFrame:
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
    return rows.with_columns(paragraph=pl.Series(paragraph, dtype=pl.UInt32))


def _text_entries(lists: Sequence[Sequence[str]]) -> pl.DataFrame:
    index, texts = _flatten(lists)
    return index.with_columns(text=pl.Series(texts, dtype=pl.String))


_ASSOCIATION_PARTS: Final = ("subject", "label", "object")


def _association_entries(lists: Sequence[Sequence[ExpectedAssociation]]) -> pl.DataFrame:
    index, entries = _flatten(lists)
    columns = _fields(entries, _ASSOCIATION_PARTS)
    return index.with_columns(
        pl.Series(part, values, dtype=pl.String)
        for part, values in zip(_ASSOCIATION_PARTS, columns, strict=True)
    )


def _citation_entries(lists: Sequence[Sequence[ExpectedCitation]]) -> pl.DataFrame:
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


def trims_to_empty(column: str) -> pl.Expr:
    """Trims to empty under Rust's ``str::trim`` (null stays null)."""
    return pl.col(column).str.strip_chars(WHITE_SPACE) == ""


def breaks_a_value_rule(expected: pl.DataFrame) -> bool:
    """Whether the ``expected`` table breaks one of Steps E–F's value rules
    (:func:`value_rule_broken`). The fast loader asks; the strict one words the failure."""
    return bool(expected.select(value_rule_broken().any()).item())


def value_rule_broken() -> pl.Expr:
    """Per ``expected`` row: whether it breaks one of Steps E–F's value rules.

    Step E: a source trims to empty, relevance above 3; Step F: an
    expected_labels entry, an association part, a citation source or a
    present quote trims to empty. Concepts and tags have no such rule.
    """
    return (
        (pl.col("relevance") > 3)
        | trims_to_empty("source")
        | (trims_to_empty("text") & (pl.col("kind") == "label"))
        | trims_to_empty("subject")
        | trims_to_empty("label")
        | trims_to_empty("object")
        | trims_to_empty("quote")
    )

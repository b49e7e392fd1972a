"""The ``expected`` table read straight from the case lines' bytes by Arrow's JSON reader.

The loader's fast path (:mod:`.dataset_fast`) decodes every case line with
msgspec, which both validates the file and builds the case objects the lanes
need. Building the ``expected`` table from those objects walks half a million
Python objects again (a getter per value, a conversion per string) and was
most of a large load. Arrow parses the same bytes in C++ *without the GIL*, so
:func:`start_reading` runs it on a second thread while msgspec decodes on the
first, and :func:`expected_from_arrow` turns its nested columns into the table
by the same assembly as the object builder (:func:`.evalcase.assemble`).

It is only ever asked about a file msgspec accepted in full, so every value
Arrow reads there was already checked; what remains is where Arrow's reading
could differ from msgspec's, and each one sends the table back to the object
builder (``None``):

* a repeated key: msgspec keeps the last value, Arrow refuses the row;
* two objects on one line, or a line Arrow skips or refuses that msgspec
  did not: the row count or the ``case_id`` column then disagrees;
* any other Arrow error.

One column Arrow cannot read: ``"section": null`` (declared, outside every
section) and an absent ``section`` (not checked) both arrive as null. When
no citation has a null section, or the bytes hold no ``null`` at all, a null
section is an absent one; else the caller supplies ``section_declared`` read
from the decoded citations (asked for only then: it walks every citation; the
loader walks them anyway while it would otherwise only wait for this thread).

The thread also judges the table by Steps E–F's value rules
(:func:`~.evalcase.value_rule_broken`), so that the main thread, still
decoding, finds the verdict waiting.

``tests/test_expected_arrow.py`` pins these and checks the two builders agree.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Final

import polars as pl
import pyarrow as pa
import pyarrow.json as pa_json

from taguru_eval.inputs.evalcase import assemble, value_rule_broken

_BLOCK_BYTES: Final = 1 << 22
"""Arrow's parsing block (a longer line is still read whole: Arrow grows the block)."""


def _structs(*fields: tuple[str, pa.DataType]) -> pa.DataType:
    return pa.list_(pa.struct(list(fields)))


_SCHEMA: Final = pa.schema(
    [
        ("case_id", pa.string()),
        (
            "expected_sources",
            _structs(
                ("source", pa.string()),
                ("paragraphs", pa.list_(pa.int64())),
                ("relevance", pa.int64()),
            ),
        ),
        ("expected_concepts", pa.list_(pa.string())),
        ("expected_labels", pa.list_(pa.string())),
        (
            "expected_associations",
            _structs(("subject", pa.string()), ("label", pa.string()), ("object", pa.string())),
        ),
        (
            "expected_citations",
            _structs(
                ("source", pa.string()),
                ("paragraph", pa.int64()),
                ("section", pa.string()),
                ("quote", pa.string()),
            ),
        ),
    ]
)
_PARSE: Final = pa_json.ParseOptions(explicit_schema=_SCHEMA, unexpected_field_behavior="ignore")
_READ: Final = pa_json.ReadOptions(use_threads=False, block_size=_BLOCK_BYTES)


@dataclass(frozen=True)
class _Read:
    table: pa.Table
    case_ids: pl.Series  # Arrow's own case_id column
    expected: pl.DataFrame | None  # built with a null section read as absent
    breaks_a_rule: bool
    null_sections: bool  # some citation row has a null section


@dataclass(frozen=True)
class CheckedExpected:
    """The ``expected`` table Arrow's reading gave, and whether it breaks a value rule."""

    table: pl.DataFrame
    breaks_a_rule: bool


class ArrowRead:
    """Arrow's reading of the case lines, and the ``expected`` table built from it,
    under way on a thread of its own."""

    def __init__(self, future: Future[_Read | None], pool: ThreadPoolExecutor) -> None:
        self._future = future
        self._pool = pool

    def _read(self) -> _Read | None:
        try:
            return self._future.result()
        finally:
            self._pool.shutdown(wait=False)

    def done(self) -> bool:
        """Whether the thread has finished."""
        return self._future.done()

    def result(self) -> pa.Table | None:
        """The table (one row per case line), or ``None`` when Arrow refused the bytes."""
        read = self._read()
        return None if read is None else read.table

    def expected(
        self, case_ids: pl.Series, section_declared: Callable[[], Sequence[bool] | None]
    ) -> CheckedExpected | None:
        """What :func:`expected_from_arrow` answers for ``case_ids`` and
        ``section_declared()``, from the table the thread already built (only
        ``section_declared`` is set here, and only asked for when some citation
        has a null section), with the thread's verdict on the value rules."""
        read = self._read()
        if read is None or read.expected is None or not read.case_ids.equals(case_ids):
            return None
        declared = section_declared() if read.null_sections else None
        if declared is None:
            return CheckedExpected(read.expected, read.breaks_a_rule)
        table = _with_section_declared(read.expected, declared)
        # The flag is no input to the value rules: the verdict stands.
        return None if table is None else CheckedExpected(table, read.breaks_a_rule)


def start_reading(cases: memoryview) -> ArrowRead:
    """Start parsing the bytes of the case lines (everything after the header line)
    and building the ``expected`` table from them."""
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="eval-jsonl-arrow")
    return ArrowRead(pool.submit(_read_and_build, cases), pool)


def _read_and_build(cases: memoryview) -> _Read | None:
    # Polars releases the GIL too: the table is built while msgspec still decodes.
    try:
        table = pa_json.read_json(
            pa.BufferReader(pa.py_buffer(cases)), read_options=_READ, parse_options=_PARSE
        )
    except (pa.ArrowException, ValueError):
        return None
    case_ids = pl.Series("case_id", table.column("case_id"), dtype=pl.String)
    try:
        plan = _expected_plan(table, case_ids)
        if plan is None:
            return _Read(table, case_ids, None, breaks_a_rule=False, null_sections=False)
        null_section = (pl.col("kind") == "citation") & pl.col("section").is_null()
        # The verdicts ride along as constant columns: one collect, one wait for the lock.
        judged = plan.with_columns(
            _breaks=value_rule_broken().any(), _null_sections=null_section.any()
        ).collect()
    except pl.exceptions.PolarsError:
        return _Read(table, case_ids, None, breaks_a_rule=False, null_sections=False)
    breaks_a_rule = bool(judged.height) and bool(judged.get_column("_breaks")[0])
    null_sections = bool(judged.height) and bool(judged.get_column("_null_sections")[0])
    expected = judged.drop("_breaks", "_null_sections")
    return _Read(table, case_ids, expected, breaks_a_rule, null_sections)


def _with_section_declared(
    expected: pl.DataFrame, section_declared: Sequence[bool]
) -> pl.DataFrame | None:
    """``section_declared`` set from the decoded citations (file order is the
    order of the citation rows: the table sorts stably by case, then kind)."""
    rows = (expected.get_column("kind") == "citation").arg_true()
    if rows.len() != len(section_declared):
        return None
    column = expected.get_column("section_declared").clone()
    column.scatter(rows, pl.Series(section_declared, dtype=pl.Boolean))
    return expected.with_columns(column)


def expected_from_arrow(
    table: pa.Table, case_ids: pl.Series, section_declared: Sequence[bool] | None
) -> pl.DataFrame | None:
    """The ``expected`` table from Arrow's rows; ``None`` unless they are exactly the cases.

    ``section_declared``: one flag per expected citation in file order, needed
    when the bytes hold a ``null`` (``None``: a null section is an absent one).
    """
    plan = _expected_plan(table, case_ids)
    if plan is None:
        return None
    expected = plan.collect()
    if section_declared is None:
        return expected
    return _with_section_declared(expected, section_declared)


def _expected_plan(table: pa.Table, case_ids: pl.Series) -> pl.LazyFrame | None:
    """The plan of the ``expected`` table, with a null section read as absent;
    ``None`` unless Arrow's rows are exactly the cases."""
    frame = pl.from_arrow(table)
    assert isinstance(frame, pl.DataFrame)
    if frame.height != len(case_ids) or not frame["case_id"].equals(case_ids):
        return None
    indexed = frame.lazy().with_row_index("case_index")
    sources = _entries(indexed, "expected_sources").unnest("expected_sources")
    # One row per distinct listed paragraph, one null-paragraph row for an entry listing none.
    listed = pl.col("paragraphs").list.unique(maintain_order=True)
    sources = (
        sources.with_columns(
            relevance=pl.col("relevance").fill_null(1),
            paragraph=pl.when(listed.list.len() > 0).then(listed).otherwise(pl.lit([None])),
        )
        .drop("paragraphs")
        .explode("paragraph")
    )
    citations = _entries(indexed, "expected_citations").unnest("expected_citations")
    entries = {
        "source": sources,
        "concept": _entries(indexed, "expected_concepts").rename({"expected_concepts": "text"}),
        "label": _entries(indexed, "expected_labels").rename({"expected_labels": "text"}),
        "association": _entries(indexed, "expected_associations").unnest("expected_associations"),
        "citation": citations.with_columns(section_declared=pl.col("section").is_not_null()),
    }
    # Every row holds a value of its own in Arrow's buffers (a paragraph's 8 bytes, a
    # string's 4-byte offset), so their total size bounds the row count.
    max_rows = table.get_total_buffer_size()
    return assemble(entries, case_ids, max_rows)


def _entries(frame: pl.LazyFrame, column: str) -> pl.LazyFrame:
    """(case_index, entry_index, entry) for every entry of list column ``column``."""
    return (
        frame.select("case_index", column)
        .filter(pl.col(column).list.len() > 0)
        .with_columns(entry_index=pl.int_ranges(pl.col(column).list.len(), dtype=pl.UInt32))
        .explode(column, "entry_index")
    )

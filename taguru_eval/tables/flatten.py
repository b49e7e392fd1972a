"""Lane outputs -> nested Arrow rows as the cases finish -> the run's flat tables.

:class:`TableRows` takes lane outputs in any order (a live run adds each case
as it completes) and turns every full batch into nested Arrow rows at once,
whose dtypes derive from :mod:`.shapes`. :meth:`TableRows.finish` puts them in
case order as one nested frame, makes every table a select / explode of it,
conformed to its schema from :mod:`.schemas`, and stamps the run id, so the
tables are the same whatever the batch size and arrival order
(``tests/tables/test_table_rows.py``). :func:`build_tables`
is the same for a list of outputs already at hand (an artifact read back,
tests). A run given ``--must-refuse`` adds its probes' outputs at the end:
their rows follow the eval rows with ``population`` ``must_refuse``."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from functools import reduce
from typing import TYPE_CHECKING, Any, Final, TypeAlias, cast

import msgspec
import polars as pl
from polars.datatypes import DataTypeClass

from taguru_eval._base.jsonstrict import I64_MAX, JsonPath, JsonShapeError, describe
from taguru_eval.tables import derive
from taguru_eval.tables.columns import Columns
from taguru_eval.tables.derive import Omit
from taguru_eval.tables.schemas import (
    ANSWER_CHECKS,
    ATTRIBUTIONS,
    CALLS,
    CASE_LANES,
    CITATION_CHECKS,
    EVIDENCE_ITEMS,
    HITS,
    POPULATION_EVAL,
    POPULATION_MUST_REFUSE,
    PROBES,
    REFUSAL_LANES,
    RESOLUTIONS,
    RunTables,
    arrow_schema,
    conform,
)
from taguru_eval.tables.shapes import (
    BUDGET_REASONS,
    AssociationQuery,
    CallRecord,
    CaseBlock,
    EvidenceOutcome,
    LaneOutput,
    LanePlan,
    PlanLanes,
    PositionOutcome,
    RefusalOutput,
    RerankerPlan,
)

if TYPE_CHECKING:
    import pyarrow as pa
    import pyarrow.json as pa_json

# The nested rows hold what the flat tables read, as :mod:`.shapes` declares it,
# less what they never read or hold elsewhere: converting it would be the cost
# of every case. An evidence block's items are its ``evidence_rows`` again, and
# a call's case keys are its case's (unnested beside them they would clash).
_NOT_NESTED: Final[Omit] = {
    CallRecord: ("case_index", "case_id"),
    EvidenceOutcome: ("items", "selection"),
    RerankerPlan: ("configured", "model"),
}

_LANE_OUTPUT: Final = derive.schema(LaneOutput, _NOT_NESTED)
_REFUSAL_OUTPUT: Final = derive.schema(RefusalOutput, _NOT_NESTED)

CASE_BLOCK: Final = derive.struct(CaseBlock)
"""The members of an evaluation.json case block the lanes recorded, typed as the
tables type them: an artifact read back becomes lane outputs of these, and
:func:`type_problem` names the first of the wrong JSON type. Every other member
is ignored."""


def type_problem(value: object, dtype: pl.DataType, path: JsonPath) -> JsonShapeError | None:
    """The first member of ``value`` whose JSON type ``dtype`` cannot hold, or ``None``.

    The nested frame's own error names a Polars dtype and quotes whatever
    value it met first, often a valid one elsewhere in the batch; this walks
    one value against the dtype and names the JSON path and what belongs
    there. ``null`` (and an absent struct member) is always allowed, as the
    frame makes it a null.
    """
    stack: list[tuple[object, pl.DataType, JsonPath]] = [(value, dtype, path)]
    while stack:
        item, kind, where = stack.pop()
        if item is None:
            continue
        expected = _expected(kind)
        if not _holds(item, kind):
            return JsonShapeError(where, f"invalid type: {describe(item)}, expected {expected}")
        if isinstance(kind, pl.Struct) and isinstance(item, Mapping):
            members = list(kind.to_schema().items())
            stack.extend(
                (item.get(name), _instance(field), (*where, name))
                for name, field in reversed(members)
            )
        elif isinstance(kind, pl.List) and isinstance(item, list):
            inner = _instance(kind.inner)
            stack.extend(
                (element, inner, (*where, index))
                for index, element in reversed(list(enumerate(item)))
            )
    return None


def _instance(kind: DataTypeClass | pl.DataType) -> pl.DataType:
    # A schema may hold a bare class (pl.String) where an instance is meant.
    return kind() if isinstance(kind, DataTypeClass) else kind


def _expected(kind: pl.DataType) -> str:
    if isinstance(kind, pl.Struct):
        return "an object"
    if isinstance(kind, pl.List):
        return "an array"
    if kind == pl.String:
        return "a string"
    if kind == pl.Boolean:
        return "a boolean"
    if kind.is_integer():
        return "an integer"
    return "a number"


def _holds(item: object, kind: pl.DataType) -> bool:
    if isinstance(kind, pl.Struct):
        return isinstance(item, Mapping)
    if isinstance(kind, pl.List):
        return isinstance(item, list)
    if kind == pl.String:
        return isinstance(item, str)
    if kind == pl.Boolean:
        return isinstance(item, bool)
    if isinstance(item, bool):
        return False
    if kind.is_integer():
        return isinstance(item, int)
    return isinstance(item, int | float)


NestedChunk: TypeAlias = "pa.Table | pl.DataFrame"
"""Some outputs as nested rows: Arrow's, or Polars' for a value Arrow will not take."""

_ENCODER: Final = msgspec.json.Encoder()


_OPTIONS: Final[dict[int, pa_json.ParseOptions]] = {}
"""The parse options of each nested schema, built once (keyed by the schema's id:
the two are module constants)."""


def _parse_options(schema: pl.Schema) -> pa_json.ParseOptions:
    """How Arrow's JSON reader reads outputs of ``schema``: as its Arrow schema
    (plain lists and strings, the ones the reader builds; Polars takes either),
    every member the schema does not name ignored, at any depth.

    pyarrow is imported here, on first use: only this reference way needs it
    (a batch the columns refused, outputs read back from a document, the
    must-refuse probes), never a plain run."""
    import pyarrow.json as pa_json

    options = _OPTIONS.get(id(schema))
    if options is None:
        options = pa_json.ParseOptions(
            explicit_schema=arrow_schema(schema), unexpected_field_behavior="ignore"
        )
        _OPTIONS[id(schema)] = options
    return options


def _arrow_rows(outputs: Sequence[Mapping[str, Any]], schema: pl.Schema) -> pa.Table:
    """``outputs`` as Arrow rows: msgspec writes them as JSON lines, Arrow's JSON reader
    reads those against the schema.

    pyarrow's conversion from Python objects asks for pandas first, and so
    imports it whenever it is installed (0.5 s and 50 MiB, more than all a run
    needs besides); its JSON reader does not. A value JSON cannot spell (an
    infinite score) becomes null, as evaluation.json writes it.
    """
    import pyarrow as pa
    import pyarrow.json as pa_json

    options = _parse_options(schema)
    lines = _ENCODER.encode_lines(outputs)
    # The whole batch as one block, read on the calling thread (a block larger
    # than the batch is allocated whole; one per line costs a fixed overhead each).
    read = pa_json.ReadOptions(use_threads=False, block_size=len(lines) + 1)
    return pa_json.read_json(pa.BufferReader(lines), read_options=read, parse_options=options)


def _nested_chunk(outputs: Sequence[Mapping[str, Any]], schema: pl.Schema) -> NestedChunk:
    """Outputs as nested rows of ``schema``, in the order given (missing optional keys
    become null).

    Arrow's JSON reader converts the nested values several times faster than
    Polars' own constructor; a value it will not take (an integer past the
    column's range) goes the Polars way. The chunk stays an Arrow table: turning
    each into a Polars frame has a fixed cost per chunk, so :func:`_nested_frame`
    does it once for all.
    """
    if not outputs:  # Arrow's reader refuses an empty file
        return pl.DataFrame(schema=schema)
    import pyarrow as pa

    try:
        return _arrow_rows(outputs, schema)
    except (pa.ArrowInvalid, pa.ArrowTypeError, ValueError, TypeError):
        pass
    # A taguru count past int64 (its u64/usize go to 2^64-1; the artifact keeps
    # it exact): the int64 columns hold I64_MAX, "at least this many", where
    # Polars' constructor would make it null, indistinguishable from absent.
    saturated = [_saturated(output) for output in outputs]
    try:
        return _arrow_rows(saturated, schema)
    except (pa.ArrowInvalid, pa.ArrowTypeError, ValueError, TypeError):
        names = schema.names()
        return pl.DataFrame(
            [{name: output.get(name) for name in names} for output in saturated], schema=schema
        )


def nested_rows_problem(outputs: Sequence[LaneOutput]) -> str | None:
    """Why ``outputs`` would not become the tables' nested rows (the converter's
    first words), or None."""
    import pyarrow as pa

    try:
        chunk = _nested_chunk(outputs, _LANE_OUTPUT)
        _nested_frame([chunk])
    except (pl.exceptions.PolarsError, pa.ArrowException, OverflowError, ValueError) as exc:
        return str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return None


def _saturated(value: Any) -> Any:
    """``value`` with every integer above int64 replaced by :data:`I64_MAX`."""
    if isinstance(value, int) and not isinstance(value, bool):
        return min(value, I64_MAX)
    if isinstance(value, dict):
        return {key: _saturated(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_saturated(item) for item in value]
    return value


def _saturating_sum(columns: list[pl.Expr]) -> pl.Expr:
    """The non-negative int64 ``columns`` added without wrapping: I64_MAX at most."""

    def add(total: pl.Expr, column: pl.Expr) -> pl.Expr:
        return pl.min_horizontal(total, pl.lit(I64_MAX) - column) + column

    return reduce(add, columns)


def _nested_frame(chunks: list[NestedChunk]) -> pl.DataFrame:
    """The chunks' rows as one nested frame in case order (``case_index``, each once).

    Takes the chunks and empties ``chunks``: once they are one frame nothing else
    holds them, so their Arrow buffers are freed here rather than when the
    caller's list goes. Arrow's allocator keeps freed pages for reuse; they are
    handed back once the frame is built (a one-off call, not a process setting),
    which is most of the nested rows' footprint at 100,000 cases.
    """
    if all(isinstance(chunk, pl.DataFrame) for chunk in chunks):
        frames = cast(list[pl.DataFrame], chunks[:])
        chunks.clear()
        frame = frames[0] if len(frames) == 1 else pl.concat(frames, how="vertical")
        frames.clear()
        return frame.rechunk().sort("case_index", maintain_order=True)
    import pyarrow as pa

    taken = chunks[:]
    chunks.clear()
    arrow = [chunk for chunk in taken if isinstance(chunk, pa.Table)]
    frames = [chunk for chunk in taken if isinstance(chunk, pl.DataFrame)]
    del taken
    if arrow and not frames:
        # Sorted in Arrow, so Polars gets one ordered copy instead of making two.
        table = pa.concat_tables(arrow).sort_by("case_index")
        arrow.clear()
        converted = pl.from_arrow(table)
        del table
        assert isinstance(converted, pl.DataFrame)
        frame = converted.rechunk()
    else:
        if arrow:
            converted = pl.from_arrow(pa.concat_tables(arrow))
            assert isinstance(converted, pl.DataFrame)
            frames.append(converted)
            arrow.clear()
        frame = frames[0] if len(frames) == 1 else pl.concat(frames, how="vertical")
        frames.clear()
        frame = frame.rechunk().sort("case_index", maintain_order=True)
    pa.default_memory_pool().release_unused()
    return frame


def _passage_columns() -> list[pl.Expr]:
    """The passage outcome and plan columns a lane table keeps per case."""
    passage = pl.col("passage")
    plan = passage.struct.field("plan")
    plan_lanes = plan.struct.field("lanes")
    plan_filter = plan.struct.field("filter")
    return [
        passage.struct.field("outcome").alias("passage_outcome"),
        passage.struct.field("message").alias("passage_message"),
        passage.struct.field("latency_ms").alias("passage_latency_ms"),
        pl.when(passage.struct.field("outcome") == "searched")
        .then(passage.struct.field("hits").list.len().fill_null(0))
        .alias("hit_count"),
        plan.struct.field("context").alias("plan_context"),
        *[
            plan_lanes.struct.field(lane).struct.field(attr).alias(f"plan_{lane}_{attr}")
            for lane in derive.keys(PlanLanes)
            for attr in derive.keys(LanePlan)
        ],
        plan_filter.struct.field("eligible_sources").alias("plan_filter_eligible_sources"),
        plan_filter.struct.field("total_sources").alias("plan_filter_total_sources"),
    ]


def _hit_rows(nested: pl.DataFrame, keys: list[pl.Expr]) -> pl.DataFrame:
    """One row per served hit of every searched passage outcome."""
    passage = pl.col("passage")
    searched = nested.filter(passage.struct.field("outcome") == "searched").select(
        *keys, passage.struct.field("hits").fill_null([]).alias("hit")
    )
    return _flatten_hits(_explode_list(searched, "hit", "rank"))


def _evidence_rows(nested: pl.DataFrame, keys: list[pl.Expr]) -> pl.DataFrame:
    """One row per evidence candidate an assembled package listed."""
    return _explode_list(
        nested.select(*keys, pl.col("evidence_rows").fill_null([]).alias("evidence_row")),
        "evidence_row",
        "item_index",
    ).with_columns(pl.col("evidence_row").struct.unnest())


def _call_rows(nested: pl.DataFrame, keys: list[pl.Expr]) -> pl.DataFrame:
    return _explode_list(
        nested.select(*keys, pl.col("calls").fill_null([]).alias("call")), "call", "call_pos"
    ).with_columns(pl.col("call").struct.unnest())


def _explode_list(frame: pl.DataFrame, column: str, index_name: str) -> pl.DataFrame:
    """One row per element of list column ``column`` (a struct), with its 0-based index."""
    return (
        frame.filter(pl.col(column).list.len() > 0)
        .with_columns(pl.int_ranges(pl.col(column).list.len(), dtype=pl.Int32).alias(index_name))
        .explode([column, index_name])
    )


DEFAULT_BATCH: Final = 1024
"""Cases per batch of table rows: each becomes one Polars frame per table at once
(a few milliseconds of the event loop), so every batch's lists are let go."""

MAX_WAITING: Final = 4 * DEFAULT_BATCH
"""Outputs held back waiting for an earlier case (a slow call) before the rows give
up their case order and are sorted once at the end instead."""


class TableRows:
    """The run's tables, accumulated from lane outputs in any order.

    A live run adds each case's output as it completes (``run.runner``). Outputs
    are taken in case order (one that arrives ahead of an earlier case waits
    for it, up to :data:`MAX_WAITING`), each read at once into the tables'
    columns (:class:`~taguru_eval.tables.columns.Columns`), and every
    :data:`DEFAULT_BATCH` of them become a piece of each table. So no list of
    every case's dicts and no nested frame is ever held, and :meth:`finish`
    joins the pieces, already in case order. A batch holding a value the
    columns cannot (a count past int64) is built the reference way instead
    (:func:`_tables_of`, which saturates it). The columns take the lanes'
    outputs, whose values their decoders typed; ``from_lanes=False`` (outputs
    read back from a document, of any JSON type) takes every batch the
    reference way, whose conversion refuses a value of the wrong type where
    Polars would coerce it (``true`` for a count). Another lane producing
    :class:`LaneOutput` rows (one per case) can share one accumulator.
    ``repeat`` is the repetition of the cases its outputs are (``run --repeat``:
    one accumulator per repetition), stamped on every call.
    """

    def __init__(
        self, batch_size: int = DEFAULT_BATCH, *, repeat: int = 0, from_lanes: bool = True
    ) -> None:
        self._batch_size = max(1, batch_size)
        self._repeat = repeat
        self._from_lanes = from_lanes
        self._next = 0  # the case index taken next, in order
        self._waiting: dict[int, LaneOutput] = {}
        self._ordered = True  # every output taken so far came in case order
        self._batch: list[LaneOutput] = []
        self._columns = Columns() if from_lanes else _REFUSED
        self._pieces: list[dict[str, pl.DataFrame]] = []
        self._tables: dict[str, pl.DataFrame] | None = None

    def add(self, output: LaneOutput) -> None:
        """One case's lane output; a full batch becomes its pieces of the tables at once."""
        index = output["case_index"]
        if index == self._next and self._ordered:
            self._take(output)
            while self._next in self._waiting:
                self._take(self._waiting.pop(self._next))
        elif index > self._next and self._ordered:
            self._waiting[index] = output
            if len(self._waiting) > MAX_WAITING:
                self._give_up_order()
        else:  # an earlier case again, or order already given up: sorted at the end
            self._ordered = False
            self._take(output)

    def extend(self, outputs: Iterable[LaneOutput]) -> None:
        for output in outputs:
            self.add(output)

    def _take(self, output: LaneOutput) -> None:
        self._next = max(self._next, output["case_index"] + 1)
        self._batch.append(output)
        try:
            self._columns.add(output)
        except (TypeError, ValueError, AttributeError):  # not a shape the columns read
            self._columns = _REFUSED
        if len(self._batch) >= self._batch_size:
            self._cut()

    def _give_up_order(self) -> None:
        """Take every waiting output now (in index order); the tables are sorted at the end."""
        waiting, self._waiting = self._waiting, {}
        for index in sorted(waiting):
            self._take(waiting[index])
        self._ordered = False

    def _cut(self) -> None:
        """The batch taken so far as a piece of every table."""
        batch, columns = self._batch, self._columns
        self._batch, self._columns = [], Columns() if self._from_lanes else _REFUSED
        self._pieces.append(_piece(batch, columns, self._repeat))

    def _eval_tables(self) -> dict[str, pl.DataFrame]:
        """The eval-population rows of every output added so far, in case order.

        Kept: finishing again (the same phase finished with and without its
        probes) redoes nothing, and outputs added after a finish join the rows
        already made.
        """
        if self._waiting:
            self._give_up_order()
            self._ordered = True  # what waited comes after every case taken: still in order
        if self._batch or (self._tables is None and not self._pieces):
            self._cut()
        if self._pieces:
            fresh = _joined(self._pieces, sort=not self._ordered)
            self._pieces = []
            self._tables = fresh if self._tables is None else _in_case_order(self._tables, fresh)
            # Outputs added after this finish come after the rows made: sorted with them.
            self._ordered = False
        assert self._tables is not None
        return self._tables

    def finish(self, run_id: str, refusal_outputs: Sequence[RefusalOutput] = ()) -> RunTables:
        """Every table in case order (the order within a case kept), stamped with
        ``run_id``; ``refusal_outputs`` (a run given ``--must-refuse``) add their
        calls, hits, cue resolutions and evidence rows after the eval rows, and
        one ``refusal_lanes`` row per must-refuse case."""
        run = pl.lit(run_id, dtype=pl.String).alias("run_id")
        refusal = _refusal_tables(refusal_outputs, run)
        frames: dict[str, pl.DataFrame] = {}
        for name, rows in self._eval_tables().items():
            frame = rows.with_columns(run)
            if name in refusal:
                frame = pl.concat([frame, refusal.pop(name)], how="vertical")
            frames[name] = frame
        return RunTables(run_id=run_id, **frames, **refusal)


class _Refused(Columns):
    """A batch the columns could not read: it goes the reference way."""

    def add(self, output: LaneOutput) -> None:
        return None

    def frames(self, repeat: int) -> dict[str, pl.DataFrame]:
        raise TypeError("a lane output the columns cannot read")


_REFUSED: Final = _Refused()


def _piece(batch: list[LaneOutput], columns: Columns, repeat: int) -> dict[str, pl.DataFrame]:
    """A batch's rows of every table: from its columns, else the reference way."""
    try:
        return columns.frames(repeat)
    except (TypeError, OverflowError, ValueError, pl.exceptions.PolarsError):
        chunk = _nested_chunk(batch, _LANE_OUTPUT)
        return _tables_of(_nested_frame([chunk]), repeat)


def _joined(pieces: list[dict[str, pl.DataFrame]], *, sort: bool) -> dict[str, pl.DataFrame]:
    """The pieces of every table as one frame: in case order already, or ``sort``."""
    if len(pieces) == 1 and not sort:
        return pieces[0]
    joined = {
        name: pl.concat([piece[name] for piece in pieces], how="vertical") for name in pieces[0]
    }
    if not sort:
        return joined
    return {
        name: frame.sort(_ORDER.get(name, ["case_index"]), maintain_order=True)
        for name, frame in joined.items()
    }


_ORDER: Final = {"calls": ["case_index", "seq"]}
"""How a table's rows of one case are ordered besides their case (calls by their
sequence); every other table keeps the order the case produced its rows in."""


def _in_case_order(
    earlier: dict[str, pl.DataFrame], later: dict[str, pl.DataFrame]
) -> dict[str, pl.DataFrame]:
    """Two sets of tables of different cases as one, in case order (a case's rows
    keep their order; calls sort by their sequence within the case)."""
    return {
        name: pl.concat([rows, later[name]], how="vertical").sort(
            _ORDER.get(name, ["case_index"]), maintain_order=True
        )
        for name, rows in earlier.items()
    }


def with_repeated_calls(tables: RunTables, repeated: Sequence[pl.DataFrame]) -> RunTables:
    """``tables`` whose ``calls`` also hold the calls of the cases' other repetitions
    (``run --repeat``; each of ``repeated`` is one repetition's ``calls``): every
    eval case's calls, repetition by repetition, in case order, then the
    must-refuse probes' as before. Nothing else of the other repetitions is kept:
    a case's metrics are its first repetition's."""
    if not repeated:
        return tables
    calls = tables.calls
    probe = pl.col("population") == POPULATION_MUST_REFUSE
    eval_calls = pl.concat(
        [calls.filter(~probe), *(other.filter(~probe) for other in repeated)],
        how="vertical",
    ).sort(["case_index", "repeat", "seq"], maintain_order=True)
    return replace(tables, calls=pl.concat([eval_calls, calls.filter(probe)], how="vertical"))


def build_tables(
    lane_outputs: Iterable[LaneOutput],
    run_id: str,
    refusal_outputs: Sequence[RefusalOutput] = (),
) -> RunTables:
    """Turn per-case lane outputs into the run's flat frames (case order kept): the
    declared way, which words a value of the wrong type (outputs read back from an
    artifact); a live run's :class:`TableRows` reads its lanes' outputs into columns."""
    rows = TableRows(8 * DEFAULT_BATCH, from_lanes=False)
    rows.extend(lane_outputs)
    return rows.finish(run_id, refusal_outputs)


def _tables_of(nested: pl.DataFrame, repeat: int = 0) -> dict[str, pl.DataFrame]:
    """Nested lane outputs (in case order) as rows of every eval-population table
    (keyed by RunTables field, conformed, in case order; ``run_id`` left empty for
    :meth:`TableRows.finish`); every call is stamped with ``repeat``."""
    keys = [
        pl.lit("", dtype=pl.String).alias("run_id"),
        pl.col("case_index"),
        pl.col("case_id"),
    ]
    budget = pl.col("budget")
    budget_limits = budget.struct.field("limits")
    evidence = pl.col("evidence")
    omitted_by_reason = evidence.struct.field("omitted_by_reason")

    case_lanes = nested.select(
        *keys,
        pl.col("query"),
        pl.col("cues").fill_null([]),
        pl.col("limit"),
        pl.col("tags"),
        *_passage_columns(),
        pl.col("structural").is_not_null().alias("structural_ran"),
        pl.col("checks").list.len().fill_null(0).alias("citation_count"),
        pl.col("evidence").struct.field("outcome").alias("evidence_outcome"),
        evidence.struct.field("message").alias("evidence_message"),
        pl.col("evidence").struct.field("latency_ms").alias("evidence_latency_ms"),
        evidence.struct.field("reranker").struct.field("ran").alias("reranker_ran"),
        evidence.struct.field("reranker").struct.field("reason").alias("reranker_reason"),
        budget.struct.field("items_used").alias("budget_items_used"),
        budget.struct.field("bytes_used").alias("budget_bytes_used"),
        budget.struct.field("tokens_used").alias("budget_tokens_used"),
        budget_limits.struct.field("max_items").alias("budget_max_items"),
        budget_limits.struct.field("max_bytes").alias("budget_max_bytes"),
        budget_limits.struct.field("max_tokens").alias("budget_max_tokens"),
        budget.struct.field("omitted_total").alias("budget_omitted_total"),
        # Assembly: only the budget reasons count; baseline: every omission is the budget's.
        pl.when(evidence.is_not_null())
        .then(
            _saturating_sum(
                [omitted_by_reason.struct.field(key).fill_null(0) for key in BUDGET_REASONS]
            )
        )
        .otherwise(budget.struct.field("omitted_total"))
        .alias("budget_omitted_by_budget"),
    )

    hits = _hit_rows(nested, keys)

    structural = nested.filter(pl.col("structural").is_not_null())
    cue_rows = _explode_list(
        structural.select(*keys, pl.col("structural").struct.field("cues").alias("cue_row")),
        "cue_row",
        "cue_index",
    ).with_columns(pl.col("cue_row").struct.unnest())
    resolutions = _one_row_per_name(cue_rows.with_columns(pl.col("resolved_names").alias("name")))

    probe_rows = _explode_list(
        structural.select(*keys, pl.col("structural").struct.field("associations").alias("probe")),
        "probe",
        "association_index",
    ).with_columns(pl.col("probe").struct.unnest())
    probes = probe_rows.with_columns(
        *[
            pl.col(position).struct.field(attr).alias(f"{position}_{attr}")
            for position in ("subject", "label", "object")
            for attr in derive.keys(PositionOutcome)
        ],
        *[
            pl.col("query").struct.field(attr).alias(f"query_{attr}")
            for attr in derive.keys(AssociationQuery)
            if attr != "attributions"  # a table of its own
        ],
    )
    attributions = _explode_list(
        probe_rows.select(
            *[pl.col(k) for k in ("run_id", "case_index", "case_id", "association_index")],
            pl.col("query").struct.field("attributions").fill_null([]).alias("attribution"),
        ),
        "attribution",
        "attribution_index",
    ).with_columns(pl.col("attribution").struct.unnest())

    check_rows = _explode_list(
        nested.select(*keys, pl.col("checks").fill_null([]).alias("check_row")),
        "check_row",
        "citation_index",
    ).with_columns(pl.col("check_row").struct.unnest())
    citation_checks = check_rows.with_columns(
        pl.col("section").struct.field("check").alias("section_check"),
        pl.col("section").struct.field("expected").alias("section_expected"),
        pl.col("quote").struct.field("declared").alias("quote_declared"),
        pl.col("quote").struct.field("matched").alias("quote_matched"),
    )

    evidence_items = _evidence_rows(nested, keys)

    answer_checks = _explode_list(
        nested.select(*keys, pl.col("answer_checks").fill_null([]).alias("answer_check")),
        "answer_check",
        "check_index",
    ).with_columns(pl.col("answer_check").struct.unnest())

    call_rows = _call_rows(nested, keys).sort(["case_index", "seq"], maintain_order=True)
    population = pl.lit(POPULATION_EVAL).alias("population")
    repetition = pl.lit(repeat, dtype=pl.Int32).alias("repeat")
    return {
        "case_lanes": conform(case_lanes, CASE_LANES),
        "calls": conform(call_rows.with_columns(population, repetition), CALLS),
        "hits": conform(hits.with_columns(population), HITS),
        "resolutions": conform(resolutions.with_columns(population), RESOLUTIONS),
        "probes": conform(probes, PROBES),
        "attributions": conform(attributions, ATTRIBUTIONS),
        "citation_checks": conform(citation_checks, CITATION_CHECKS),
        "evidence_items": conform(evidence_items.with_columns(population), EVIDENCE_ITEMS),
        "answer_checks": conform(answer_checks, ANSWER_CHECKS),
    }


def _one_row_per_name(rows: pl.DataFrame) -> pl.DataFrame:
    """One row per element of the ``name`` list column (with its 0-based ``rank``);
    a row whose list is empty keeps one row with rank/name null, so the call's
    latency and error stay visible. List columns beside ``name`` of the same
    length (e.g. per-candidate tiers) are exploded with it."""
    names = pl.col("name")
    parallel = [
        column
        for column, dtype in rows.schema.items()
        if column != "name" and column in ("tier", "match_kind") and isinstance(dtype, pl.List)
    ]
    present = names.list.len() > 0
    return rows.with_columns(
        pl.when(present)
        .then(pl.int_ranges(names.list.len(), dtype=pl.Int32))
        .otherwise(pl.lit([None], dtype=pl.List(pl.Int32)))
        .alias("rank"),
        *[
            pl.when(present)
            .then(pl.col(column))
            .otherwise(pl.lit([None], dtype=pl.List(pl.String)))
            .alias(column)
            for column in ["name", *parallel]
        ],
    ).explode(["name", "rank", *parallel])


def _refusal_tables(
    refusal_outputs: Sequence[RefusalOutput], run: pl.Expr
) -> dict[str, pl.DataFrame]:
    """The must-refuse rows: ``refusal_lanes`` and the ``must_refuse`` rows of
    ``calls``, ``hits``, ``resolutions`` and ``evidence_items`` (conformed to
    their schemas)."""
    nested = _nested_frame([_nested_chunk(refusal_outputs, _REFUSAL_OUTPUT)])
    keys = [run, pl.col("case_index"), pl.col("case_id")]
    population = pl.lit(POPULATION_MUST_REFUSE).alias("population")
    lanes = nested.select(
        *keys,
        pl.col("kind"),
        pl.col("why"),
        pl.col("query"),
        pl.col("cues").fill_null([]),
        pl.col("limit"),
        pl.col("floor"),
        *_passage_columns(),
        (pl.col("cues").list.len().fill_null(0) > 0).alias("structural_ran"),
        pl.col("evidence").struct.field("outcome").alias("evidence_outcome"),
        pl.col("budget").struct.field("omitted_total").alias("omitted_total"),
    )
    cue_rows = _explode_list(
        nested.select(*keys, pl.col("cue_probes").fill_null([]).alias("cue_row")),
        "cue_row",
        "cue_index",
    ).with_columns(pl.col("cue_row").struct.unnest())
    candidates = pl.col("candidates").fill_null([])
    resolutions = _one_row_per_name(
        cue_rows.with_columns(
            pl.lit("concept").alias("kind"),
            candidates.list.eval(pl.element().struct.field("name")).alias("name"),
            candidates.list.eval(pl.element().struct.field("tier")).alias("tier"),
            candidates.list.eval(pl.element().struct.field("kind")).alias("match_kind"),
        )
    )
    calls = _call_rows(nested, keys).sort(["case_index", "seq"], maintain_order=True)
    return {
        "refusal_lanes": conform(lanes, REFUSAL_LANES),
        # The probes are sent once, whatever --repeat says.
        "calls": conform(
            calls.with_columns(population, pl.lit(0, dtype=pl.Int32).alias("repeat")), CALLS
        ),
        "hits": conform(_hit_rows(nested, keys).with_columns(population), HITS),
        "resolutions": conform(resolutions.with_columns(population), RESOLUTIONS),
        "evidence_items": conform(
            _evidence_rows(nested, keys).with_columns(population), EVIDENCE_ITEMS
        ),
    }


def _flatten_hits(frame: pl.DataFrame) -> pl.DataFrame:
    hit = pl.col("hit")
    lanes = hit.struct.field("lanes")
    return frame.with_columns(
        hit.struct.field("source").alias("source"),
        hit.struct.field("paragraph").alias("paragraph"),
        hit.struct.field("score").alias("score"),
        lanes.struct.field("bm25").struct.field("rank").alias("bm25_rank"),
        lanes.struct.field("bm25").struct.field("score").alias("bm25_score"),
        lanes.struct.field("vector").struct.field("rank").alias("vector_rank"),
        lanes.struct.field("vector").struct.field("score").alias("vector_score"),
    )

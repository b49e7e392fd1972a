"""Lane outputs straight into the run's flat tables, a column at a time.

The flat tables are declared as selects and explodes of the nested lane outputs
(:func:`taguru_eval.tables.flatten._tables_of`): that is the reference. A live
run takes the short way: each case's output is read once, as it is taken, into
one Python list per table column, and every batch becomes one Polars frame per
table, conformed to its schema. No nested rows, no JSON, no Arrow conversion of
Python objects (which imports pandas) exist on the way, and nothing is
allocated but the tables themselves: the explodes of the reference path left
more than 100 MiB behind in Polars' allocator at 20,000 cases.
``tests/tables/test_table_rows.py`` holds the two ways equal on live outputs of
every shape (baseline, ``--assembly``, ``--answers``, must-refuse runs).

A batch with a value a column's type cannot hold (a taguru count past int64)
is refused with ``TypeError``/``OverflowError``; the caller then takes that
batch the reference way, which saturates such counts.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from typing import Any, Final

import polars as pl

from taguru_eval._base.jsonstrict import I64_MAX
from taguru_eval.tables import derive
from taguru_eval.tables.schemas import (
    ANSWER_CHECKS,
    ATTRIBUTIONS,
    CALLS,
    CASE_LANES,
    CITATION_CHECKS,
    EVIDENCE_ITEMS,
    HITS,
    POPULATION_EVAL,
    PROBES,
    RESOLUTIONS,
)
from taguru_eval.tables.shapes import (
    BUDGET_REASONS,
    AnswerCheck,
    AssociationQuery,
    CallRecord,
    EvidenceRow,
    LaneOutput,
    LanePlan,
    PlanLanes,
    PositionOutcome,
)

SCHEMAS: Final[dict[str, pl.Schema]] = {
    "case_lanes": CASE_LANES,
    "calls": CALLS,
    "hits": HITS,
    "resolutions": RESOLUTIONS,
    "probes": PROBES,
    "attributions": ATTRIBUTIONS,
    "citation_checks": CITATION_CHECKS,
    "evidence_items": EVIDENCE_ITEMS,
    "answer_checks": ANSWER_CHECKS,
}
"""The eval-population tables, by :class:`~taguru_eval.tables.schemas.RunTables` field."""

_CALL_FIELDS: Final = tuple(
    name for name in derive.keys(CallRecord) if name not in ("case_index", "case_id")
)
_PLAN_LANES: Final = derive.keys(PlanLanes)
_LANE_PLAN: Final = derive.keys(LanePlan)
_POSITION: Final = derive.keys(PositionOutcome)
_POSITIONS: Final = ("subject", "label", "object")
_QUERY: Final = tuple(name for name in derive.keys(AssociationQuery) if name != "attributions")
_EVIDENCE_ROW: Final = derive.keys(EvidenceRow)
_ANSWER_CHECK: Final = derive.keys(AnswerCheck)
_NO_DICT: Final[Mapping[str, Any]] = {}


class Columns:
    """The flat tables' columns of the outputs added so far (one list per column)."""

    def __init__(self) -> None:
        self._columns: dict[str, dict[str, list[Any]]] = {
            table: {name: [] for name in schema.names() if name != "run_id"}
            for table, schema in SCHEMAS.items()
        }

    def __len__(self) -> int:
        return len(self._columns["case_lanes"]["case_index"])

    def add(self, output: LaneOutput) -> None:
        """One case's rows of every table (the reference's rows, in its order)."""
        index, case_id = output["case_index"], output["case_id"]
        passage = _struct(output["passage"])
        self._case_lane(output, passage)
        if passage.get("outcome") == "searched":
            self._hits(index, case_id, _items(passage.get("hits")))
        structural = output.get("structural")
        if structural is not None:
            self._resolutions(index, case_id, _items(structural.get("cues")))
            self._probes(index, case_id, _items(structural.get("associations")))
        self._citation_checks(index, case_id, _items(output.get("checks")))
        self._rows(
            "evidence_items",
            index,
            case_id,
            "item_index",
            _items(output.get("evidence_rows")),
            _EVIDENCE_ROW,
            population=True,
        )
        self._rows(
            "answer_checks",
            index,
            case_id,
            None,
            _items(output.get("answer_checks")),
            _ANSWER_CHECK,
        )
        self._calls(index, case_id, _items(output.get("calls")))

    def frames(self, repeat: int) -> dict[str, pl.DataFrame]:
        """Every table of the outputs added, conformed to its schema (``run_id`` empty,
        every call stamped with ``repeat``); raises ``TypeError``/``OverflowError``
        for a value a column cannot hold."""
        calls = self._columns["calls"]
        calls["population"] = [POPULATION_EVAL] * len(calls["seq"])
        calls["repeat"] = [repeat] * len(calls["seq"])
        frames: dict[str, pl.DataFrame] = {}
        for table, schema in SCHEMAS.items():
            columns = self._columns[table]
            rows = len(columns["case_index"])
            series: dict[str, pl.Series] = {}
            listed: list[tuple[str, list[Any], pl.List]] = []
            for name, dtype in schema.items():
                if name == "run_id":
                    series[name] = pl.Series(name, [""] * rows, dtype=pl.String)
                elif isinstance(dtype, pl.List):
                    listed.append((name, columns[name], dtype))
                else:
                    series[name] = pl.Series(name, columns[name], dtype=dtype)
            series.update(_list_columns(listed))
            frames[table] = pl.DataFrame([series[name] for name in schema.names()])
        return frames

    # ---------------------------------------------------------------- one table each

    def _case_lane(self, output: LaneOutput, passage: Mapping[str, Any]) -> None:
        column = self._columns["case_lanes"]
        column["case_index"].append(output["case_index"])
        column["case_id"].append(output["case_id"])
        column["query"].append(output.get("query"))
        cues = output.get("cues")
        column["cues"].append([] if cues is None else cues)  # read as a list with the others
        column["limit"].append(output.get("limit"))
        column["tags"].append(output.get("tags"))
        outcome = passage.get("outcome")
        column["passage_outcome"].append(outcome)
        column["passage_message"].append(passage.get("message"))
        column["passage_latency_ms"].append(passage.get("latency_ms"))
        column["hit_count"].append(
            len(_items(passage.get("hits"))) if outcome == "searched" else None
        )
        plan = _struct(passage.get("plan"))
        column["plan_context"].append(plan.get("context"))
        plan_lanes = _struct(plan.get("lanes"))
        for lane in _PLAN_LANES:
            lane_plan = _struct(plan_lanes.get(lane))
            for attr in _LANE_PLAN:
                column[f"plan_{lane}_{attr}"].append(lane_plan.get(attr))
        plan_filter = _struct(plan.get("filter"))
        column["plan_filter_eligible_sources"].append(plan_filter.get("eligible_sources"))
        column["plan_filter_total_sources"].append(plan_filter.get("total_sources"))
        column["structural_ran"].append(output.get("structural") is not None)
        column["citation_count"].append(len(_items(output.get("checks"))))
        evidence = output.get("evidence")
        evidence_block = _struct(evidence)
        column["evidence_outcome"].append(evidence_block.get("outcome"))
        column["evidence_message"].append(evidence_block.get("message"))
        column["evidence_latency_ms"].append(evidence_block.get("latency_ms"))
        reranker = _struct(evidence_block.get("reranker"))
        column["reranker_ran"].append(reranker.get("ran"))
        column["reranker_reason"].append(reranker.get("reason"))
        budget: Mapping[str, Any] = _struct(output.get("budget"))
        limits = _struct(budget.get("limits"))
        column["budget_items_used"].append(budget.get("items_used"))
        column["budget_bytes_used"].append(budget.get("bytes_used"))
        column["budget_tokens_used"].append(budget.get("tokens_used"))
        column["budget_max_items"].append(limits.get("max_items"))
        column["budget_max_bytes"].append(limits.get("max_bytes"))
        column["budget_max_tokens"].append(limits.get("max_tokens"))
        column["budget_omitted_total"].append(budget.get("omitted_total"))
        if evidence is not None:
            # Assembly: only the budget reasons count (saturating at int64's largest).
            reasons = _struct(evidence_block.get("omitted_by_reason"))
            by_budget = sum(_count(reasons.get(key)) for key in BUDGET_REASONS)
            column["budget_omitted_by_budget"].append(min(by_budget, I64_MAX))
        else:  # baseline: every omission is the budget's
            column["budget_omitted_by_budget"].append(budget.get("omitted_total"))

    def _hits(self, index: int, case_id: str, hits: Sequence[Mapping[str, Any]]) -> None:
        column = self._columns["hits"]
        for rank, hit in enumerate(hits):
            column["case_index"].append(index)
            column["case_id"].append(case_id)
            column["rank"].append(rank)
            column["source"].append(hit.get("source"))
            column["paragraph"].append(hit.get("paragraph"))
            column["score"].append(hit.get("score"))
            lanes = _struct(hit.get("lanes"))
            bm25 = _struct(lanes.get("bm25"))
            vector = _struct(lanes.get("vector"))
            column["bm25_rank"].append(bm25.get("rank"))
            column["bm25_score"].append(bm25.get("score"))
            column["vector_rank"].append(vector.get("rank"))
            column["vector_score"].append(vector.get("score"))
            column["population"].append(POPULATION_EVAL)

    def _resolutions(self, index: int, case_id: str, cues: Sequence[Mapping[str, Any]]) -> None:
        column = self._columns["resolutions"]
        for cue_index, cue in enumerate(cues):
            names = _items(cue.get("resolved_names"))
            # One row per resolved name; a cue that resolved none keeps one row
            # (its latency and error stay visible) with no rank and no name.
            for rank, name in enumerate(names) if names else ((None, None),):
                column["case_index"].append(index)
                column["case_id"].append(case_id)
                column["cue_index"].append(cue_index)
                column["cue"].append(cue.get("cue"))
                column["kind"].append(cue.get("kind"))
                column["tier"].append(cue.get("tier"))
                column["error"].append(cue.get("error"))
                column["latency_ms"].append(cue.get("latency_ms"))
                column["rank"].append(rank)
                column["name"].append(name)
                column["population"].append(POPULATION_EVAL)
                column["match_kind"].append(None)

    def _probes(self, index: int, case_id: str, probes: Sequence[Mapping[str, Any]]) -> None:
        column = self._columns["probes"]
        attribution = self._columns["attributions"]
        for association_index, probe in enumerate(probes):
            column["case_index"].append(index)
            column["case_id"].append(case_id)
            column["association_index"].append(association_index)
            for key in ("subject_cue", "label_cue", "object_cue"):
                column[key].append(probe.get(key))
            for position in _POSITIONS:
                outcome = _struct(probe.get(position))
                for attr in _POSITION:
                    column[f"{position}_{attr}"].append(outcome.get(attr))
            query = _struct(probe.get("query"))
            for attr in _QUERY:
                column[f"query_{attr}"].append(query.get(attr))
            for attribution_index, found in enumerate(_items(query.get("attributions"))):
                attribution["case_index"].append(index)
                attribution["case_id"].append(case_id)
                attribution["association_index"].append(association_index)
                attribution["attribution_index"].append(attribution_index)
                attribution["source"].append(found.get("source"))
                attribution["paragraph"].append(found.get("paragraph"))

    def _citation_checks(
        self, index: int, case_id: str, checks: Sequence[Mapping[str, Any]]
    ) -> None:
        column = self._columns["citation_checks"]
        for citation_index, check in enumerate(checks):
            column["case_index"].append(index)
            column["case_id"].append(case_id)
            column["citation_index"].append(citation_index)
            for key in ("source", "paragraph", "served", "outcome", "code", "message"):
                column[key].append(check.get(key))
            column["latency_ms"].append(check.get("latency_ms"))
            section = _struct(check.get("section"))
            quote = _struct(check.get("quote"))
            column["section_check"].append(section.get("check"))
            column["section_expected"].append(section.get("expected"))
            column["quote_declared"].append(quote.get("declared"))
            column["quote_matched"].append(quote.get("matched"))

    def _calls(self, index: int, case_id: str, calls: Sequence[Mapping[str, Any]]) -> None:
        column = self._columns["calls"]
        ordered = sorted(calls, key=_seq) if _out_of_order(calls) else calls
        for call in ordered:
            column["case_index"].append(index)
            column["case_id"].append(case_id)
            for key in _CALL_FIELDS:
                column[key].append(call.get(key))

    def _rows(
        self,
        table: str,
        index: int,
        case_id: str,
        position: str | None,
        rows: Sequence[Mapping[str, Any]],
        fields: tuple[str, ...],
        *,
        population: bool = False,
    ) -> None:
        """A list of flat records as rows (with their 0-based ``position`` when the
        table keeps it)."""
        column = self._columns[table]
        for at, row in enumerate(rows):
            column["case_index"].append(index)
            column["case_id"].append(case_id)
            if position is not None:
                column[position].append(at)
            for key in fields:
                if key in column:
                    column[key].append(row.get(key))
            if population:
                column["population"].append(POPULATION_EVAL)


def _struct(value: Any) -> Mapping[str, Any]:
    """A struct member as the reference reads it: an object, or absent (null); any
    other value is refused (the reference words the problem)."""
    if value is None:
        return _NO_DICT
    if isinstance(value, Mapping):
        return value
    raise TypeError(f"expected an object, got {type(value).__name__}")


def _items(value: Any) -> Sequence[Any]:
    """A list member as the reference reads it: a list, or absent (no rows)."""
    if value is None:
        return ()
    if isinstance(value, list):
        return value
    raise TypeError(f"expected a list, got {type(value).__name__}")


def _count(value: Any) -> int:
    """An omission count (absent: none); any other value is refused."""
    if value is None:
        return 0
    if type(value) is int:
        return value
    raise TypeError(f"expected an integer, got {type(value).__name__}")


def _seq(call: Mapping[str, Any]) -> Any:
    return call.get("seq")


def _out_of_order(calls: Sequence[Mapping[str, Any]]) -> bool:
    """Whether a case's calls are not in ``seq`` order (never, for a live run's)."""
    return any(
        not isinstance(a.get("seq"), int)
        or not isinstance(b.get("seq"), int)
        or a["seq"] > b["seq"]
        for a, b in itertools.pairwise(calls)
    )


def _list_columns(listed: list[tuple[str, list[Any], pl.List]]) -> dict[str, pl.Series]:
    """List columns from their rows' Python lists (``None``: a null list).

    Polars builds a list column from nested Python lists at several microseconds
    a row; from one flat column and each row's range of it, in one select for
    all of a table's list columns, at a fraction of that.
    """
    if not listed:
        return {}
    columns: list[pl.Expr] = []
    for name, rows, dtype in listed:
        if not all(row is None or isinstance(row, list) for row in rows):
            raise TypeError(f"{name}: a value that is not a list")
        lengths = pl.Series([0 if row is None else len(row) for row in rows], dtype=pl.Int64)
        values = pl.Series([value for row in rows if row for value in row], dtype=dtype.inner)
        start = lengths.cum_sum() - lengths
        ranges = pl.lit(values).implode().list.gather(pl.int_ranges(start, start + lengths))
        present = pl.Series([row is not None for row in rows], dtype=pl.Boolean)
        columns.append(pl.when(present).then(ranges).alias(name))
    return {series.name: series for series in pl.select(columns).iter_columns()}

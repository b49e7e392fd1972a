"""Lane outputs straight into the run's flat tables, a column at a time.

The flat tables are declared as selects and explodes of the nested lane outputs
(:func:`taguru_eval.tables.flatten._tables_of`): that is the reference. A live
run takes the short way: each case's output is read once, as it is taken, into
one tuple per row of each table, and every batch becomes one Polars frame per
table, a column at a time, conformed to its schema. No nested rows, no JSON and
no Arrow conversion of Python objects (which imports pandas) exist on the way,
and nothing is allocated but the tables themselves: the explodes of the
reference path left more than 100 MiB behind in Polars' allocator at 20,000 cases.
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
_KEYS: Final = ("case_index", "case_id")

FIELDS: Final[dict[str, tuple[str, ...]]] = {
    "case_lanes": (
        *_KEYS, "query", "cues", "limit", "tags", "passage_outcome", "passage_message",
        "passage_latency_ms", "hit_count", "plan_context",
        *(f"plan_{lane}_{attr}" for lane in _PLAN_LANES for attr in _LANE_PLAN),
        "plan_filter_eligible_sources", "plan_filter_total_sources", "structural_ran",
        "citation_count", "evidence_outcome", "evidence_message", "evidence_latency_ms",
        "reranker_ran", "reranker_reason", "budget_items_used", "budget_bytes_used",
        "budget_tokens_used", "budget_max_items", "budget_max_bytes", "budget_max_tokens",
        "budget_omitted_total", "budget_omitted_by_budget",
    ),
    "calls": (*_KEYS, *_CALL_FIELDS),
    "hits": (
        *_KEYS, "rank", "source", "paragraph", "score", "bm25_rank", "bm25_score",
        "vector_rank", "vector_score",
    ),
    "resolutions": (
        *_KEYS, "cue_index", "cue", "kind", "tier", "error", "latency_ms", "rank", "name",
    ),
    "probes": (
        *_KEYS, "association_index", "subject_cue", "label_cue", "object_cue",
        *(f"{position}_{attr}" for position in _POSITIONS for attr in _POSITION),
        *(f"query_{attr}" for attr in _QUERY),
    ),
    "attributions": (*_KEYS, "association_index", "attribution_index", "source", "paragraph"),
    "citation_checks": (
        *_KEYS, "citation_index", "source", "paragraph", "served", "outcome", "code",
        "message", "latency_ms", "section_check", "section_expected", "quote_declared",
        "quote_matched",
    ),
    "evidence_items": (*_KEYS, "item_index", *_EVIDENCE_ROW),
    "answer_checks": (*_KEYS, *_ANSWER_CHECK),
}  # fmt: skip
"""Each table's columns as :class:`Columns` records a row of it (a tuple, in this
order); the others are the same for every row (``run_id``, ``population``, ``repeat``,
``match_kind``)."""


class Columns:
    """The flat tables' rows of the outputs added so far (one tuple per row)."""

    def __init__(self) -> None:
        self._rows: dict[str, list[tuple[Any, ...]]] = {table: [] for table in SCHEMAS}

    def __len__(self) -> int:
        return len(self._rows["case_lanes"])

    def add(self, output: LaneOutput) -> None:
        """One case's rows of every table (the reference's rows, in its order)."""
        index, case_id = output["case_index"], output["case_id"]
        passage = _struct(output["passage"])
        hits = _items(passage.get("hits")) if passage.get("outcome") == "searched" else None
        checks = _items(output.get("checks"))
        self._rows["case_lanes"].append(_case_lane(output, passage, hits, checks))
        if hits:
            self._hits(index, case_id, hits)
        structural = output.get("structural")
        if structural is not None:
            self._resolutions(index, case_id, _items(structural.get("cues")))
            self._probes(index, case_id, _items(structural.get("associations")))
        if checks:
            self._citation_checks(index, case_id, checks)
        rows = self._rows["evidence_items"]
        for at, row in enumerate(_items(output.get("evidence_rows"))):
            rows.append((index, case_id, at, *(row.get(key) for key in _EVIDENCE_ROW)))
        rows = self._rows["answer_checks"]
        for row in _items(output.get("answer_checks")):
            rows.append((index, case_id, *(row.get(key) for key in _ANSWER_CHECK)))
        calls = _items(output.get("calls"))
        rows = self._rows["calls"]
        for call in sorted(calls, key=_seq) if _out_of_order(calls) else calls:
            rows.append((index, case_id, *(call.get(key) for key in _CALL_FIELDS)))

    def frames(self, repeat: int) -> dict[str, pl.DataFrame]:
        """Every table of the outputs added, conformed to its schema (``run_id`` empty,
        every call stamped with ``repeat``); raises ``TypeError``/``OverflowError``
        for a value a column cannot hold."""
        constant: dict[str, Any] = {
            "run_id": "",
            "population": POPULATION_EVAL,
            "repeat": repeat,
            "match_kind": None,
        }
        frames: dict[str, pl.DataFrame] = {}
        for table, schema in SCHEMAS.items():
            rows = self._rows[table]
            fields = FIELDS[table]
            columns = dict(zip(fields, zip(*rows, strict=True), strict=False)) if rows else {}
            series: dict[str, pl.Series] = {}
            listed: list[tuple[str, Sequence[Any], pl.List]] = []
            for name, dtype in schema.items():
                if name in fields:
                    values: Sequence[Any] = columns.get(name, ())
                else:
                    values = [constant[name]] * len(rows)
                if isinstance(dtype, pl.List):
                    listed.append((name, values, dtype))
                else:
                    series[name] = pl.Series(name, values, dtype=dtype)
            series.update(_list_columns(listed))
            frames[table] = pl.DataFrame([series[name] for name in schema.names()])
        return frames

    # ---------------------------------------------------------------- one table each

    def _hits(self, index: int, case_id: str, hits: Sequence[Mapping[str, Any]]) -> None:
        rows = self._rows["hits"]
        for rank, hit in enumerate(hits):
            lanes = _struct(hit.get("lanes"))
            bm25 = _struct(lanes.get("bm25"))
            vector = _struct(lanes.get("vector"))
            rows.append(
                (
                    index, case_id, rank, hit.get("source"), hit.get("paragraph"),
                    hit.get("score"), bm25.get("rank"), bm25.get("score"), vector.get("rank"),
                    vector.get("score"),
                )
            )  # fmt: skip

    def _resolutions(self, index: int, case_id: str, cues: Sequence[Mapping[str, Any]]) -> None:
        rows = self._rows["resolutions"]
        for cue_index, cue in enumerate(cues):
            head = (
                index, case_id, cue_index, cue.get("cue"), cue.get("kind"), cue.get("tier"),
                cue.get("error"), cue.get("latency_ms"),
            )  # fmt: skip
            names = _items(cue.get("resolved_names"))
            # One row per resolved name; a cue that resolved none keeps one row
            # (its latency and error stay visible) with no rank and no name.
            for rank, name in enumerate(names) if names else ((None, None),):
                rows.append((*head, rank, name))

    def _probes(self, index: int, case_id: str, probes: Sequence[Mapping[str, Any]]) -> None:
        rows = self._rows["probes"]
        attributions = self._rows["attributions"]
        for association_index, probe in enumerate(probes):
            positions = [_struct(probe.get(position)) for position in _POSITIONS]
            query = _struct(probe.get("query"))
            rows.append(
                (
                    index, case_id, association_index, probe.get("subject_cue"),
                    probe.get("label_cue"), probe.get("object_cue"),
                    *(outcome.get(attr) for outcome in positions for attr in _POSITION),
                    *(query.get(attr) for attr in _QUERY),
                )
            )  # fmt: skip
            for attribution_index, found in enumerate(_items(query.get("attributions"))):
                attributions.append(
                    (
                        index, case_id, association_index, attribution_index,
                        found.get("source"), found.get("paragraph"),
                    )
                )  # fmt: skip

    def _citation_checks(
        self, index: int, case_id: str, checks: Sequence[Mapping[str, Any]]
    ) -> None:
        rows = self._rows["citation_checks"]
        for citation_index, check in enumerate(checks):
            section = _struct(check.get("section"))
            quote = _struct(check.get("quote"))
            rows.append(
                (
                    index, case_id, citation_index, check.get("source"), check.get("paragraph"),
                    check.get("served"), check.get("outcome"), check.get("code"),
                    check.get("message"), check.get("latency_ms"), section.get("check"),
                    section.get("expected"), quote.get("declared"), quote.get("matched"),
                )
            )  # fmt: skip


def _case_lane(
    output: LaneOutput,
    passage: Mapping[str, Any],
    hits: Sequence[Any] | None,
    checks: Sequence[Any],
) -> tuple[Any, ...]:
    """A case's ``case_lanes`` row, in :data:`FIELDS` order."""
    plan = _struct(passage.get("plan"))
    plan_lanes = _struct(plan.get("lanes"))
    lane_plans = [_struct(plan_lanes.get(lane)) for lane in _PLAN_LANES]
    plan_filter = _struct(plan.get("filter"))
    evidence = output.get("evidence")
    evidence_block = _struct(evidence)
    reranker = _struct(evidence_block.get("reranker"))
    budget = _struct(output.get("budget"))
    limits = _struct(budget.get("limits"))
    by_budget: int | None
    if evidence is not None:
        # Assembly: only the budget reasons count (saturating at int64's largest).
        reasons = _struct(evidence_block.get("omitted_by_reason"))
        by_budget = min(sum(_count(reasons.get(key)) for key in BUDGET_REASONS), I64_MAX)
    else:  # baseline: every omission is the budget's
        by_budget = budget.get("omitted_total")
    cues = output.get("cues")
    return (
        output["case_index"], output["case_id"], output.get("query"),
        [] if cues is None else cues, output.get("limit"), output.get("tags"),
        passage.get("outcome"), passage.get("message"), passage.get("latency_ms"),
        None if hits is None else len(hits), plan.get("context"),
        *(lane_plan.get(attr) for lane_plan in lane_plans for attr in _LANE_PLAN),
        plan_filter.get("eligible_sources"), plan_filter.get("total_sources"),
        output.get("structural") is not None, len(checks),
        evidence_block.get("outcome"), evidence_block.get("message"),
        evidence_block.get("latency_ms"), reranker.get("ran"), reranker.get("reason"),
        budget.get("items_used"), budget.get("bytes_used"), budget.get("tokens_used"),
        limits.get("max_items"), limits.get("max_bytes"), limits.get("max_tokens"),
        budget.get("omitted_total"), by_budget,
    )  # fmt: skip


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


def _list_columns(listed: list[tuple[str, Sequence[Any], pl.List]]) -> dict[str, pl.Series]:
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

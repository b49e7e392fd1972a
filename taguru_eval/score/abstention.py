"""The must-refuse verdicts and the abstention/answerability metrics (ABSTENTION.md §3.5–§3.7).

Every verdict is a Polars expression over the rows the probes left in the
run's tables — ``refusal_lanes`` (the plan each passage probe got), the
``must_refuse`` rows of ``hits`` (which served hit carries ``lanes.vector``)
and of ``resolutions`` (which cue resolved to a name) — never a score or a
cosine. The same passage rule, applied to an eval case's own ``case_lanes``
row and hits, gives the answerable population its ``offered`` verdict, so the
two populations are judged under one rule and one floor (§3.11).

Each metric is a ratio (or count) over one population: :func:`membership`
lists, per metric, every case in its denominator and whether it counts toward
the numerator. The values (:func:`membership_metrics`) and the gate's list of
offending case_ids both come from that one frame.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

import polars as pl

from taguru_eval.catalog import ABSTENTION_METRICS, COUNT
from taguru_eval.options import RefusalRule
from taguru_eval.score.stats import ratio
from taguru_eval.tables.schemas import REFUSAL_CASES, RunTables, conform

ABSTAINED: Final = "abstained"
SURFACED: Final = "surfaced"
UNDETERMINED: Final = "undetermined"
FAILED: Final = "failed"
VERDICTS: Final = (ABSTAINED, SURFACED, UNDETERMINED, FAILED)
DETERMINATE: Final = (ABSTAINED, SURFACED)

# Machine-readable reasons (every verdict but abstained carries one).
REQUEST_FAILED: Final = "request_failed"
UNPARSEABLE_RESPONSE: Final = "unparseable_response"
NO_PLAN: Final = "no_plan"
LANES_SKIPPED: Final = "lanes_skipped"
NO_ELIGIBLE_SOURCES: Final = "no_eligible_sources"
VECTOR_LANE_NOT_RUN: Final = "vector_lane_not_run"
PASSAGE_VECTOR_HIT: Final = "passage_vector_hit"
PASSAGE_HIT: Final = "passage_hit"
STRUCTURAL_CANDIDATE: Final = "structural_candidate"
RESOLVE_FAILED: Final = "resolve_failed"
EVIDENCE_GRAPH_ITEM: Final = "evidence_graph_item"
EVIDENCE_VECTOR_PASSAGE: Final = "evidence_vector_passage"
EVIDENCE_ITEM: Final = "evidence_item"
BUDGET_HID: Final = "budget_hid"
BUDGET_OMITTED: Final = "budget_omitted"
PASSAGE_VECTORS_NOT_READY: Final = "passage_vectors_not_ready"

VECTOR_EVIDENCE_LANES: Final = ("passage_vector", "passage_fused")
"""The lane taguru gives an evidence passage whose hit carries ``lanes.vector``
(HTTP.md §6.9, §8.1): only vector, or both lanes."""
GRAPH_ITEM_KINDS: Final = ("association", "community")

MEMBERSHIP_SCHEMA: Final = {
    "metric": pl.String,
    "case_index": pl.Int32,
    "case_id": pl.String,
    "counted": pl.Boolean,
}
"""One row per (metric, case in its denominator); ``counted``: in its numerator."""

_VERDICT = pl.String


def _text(value: str | None) -> pl.Expr:
    return pl.lit(value, dtype=pl.String)


def passage_rule(
    lanes: pl.DataFrame, hits: pl.DataFrame, calls: pl.DataFrame, rule: RefusalRule
) -> pl.DataFrame:
    """The passage-probe verdict of each row of ``lanes`` (§3.5).

    ``lanes`` has ``case_index``, ``passage_outcome`` and the ``plan_*``
    columns of a lane table; ``hits`` and ``calls`` are the same
    population's rows. Returns ``case_index``, ``verdict``, ``reason``,
    ``hits_served``, ``vector_hits``, ``bm25_only_hits``. Under ``semantic`` a
    probe surfaces only through a served hit carrying ``lanes.vector``
    (``vector_rank`` set) and abstains only when the plan says the vector lane
    ran; under ``any`` any served hit surfaces.
    """
    served = hits.group_by("case_index").agg(
        pl.len().cast(pl.Int64).alias("hits_served"),
        pl.col("vector_rank").is_not_null().sum().cast(pl.Int64).alias("vector_hits"),
    )
    passage_status = _call_status(calls, "passage")
    frame = (
        lanes.select(
            "case_index",
            "passage_outcome",
            "plan_context",
            "plan_bm25_ran",
            "plan_vector_ran",
            "plan_filter_eligible_sources",
        )
        .join(served, on="case_index", how="left")
        .join(passage_status, on="case_index", how="left")
        .with_columns(pl.col("hits_served", "vector_hits").fill_null(0))
    )
    failed_reason = _failed_reason(pl.col("passage_http_status"))
    surfaces = pl.col("vector_hits") > 0 if rule == "semantic" else pl.col("hits_served") > 0
    surfaced_reason = PASSAGE_VECTOR_HIT if rule == "semantic" else PASSAGE_HIT
    vector_ran = pl.col("plan_vector_ran").fill_null(False)
    both_skipped = ~pl.col("plan_bm25_ran").fill_null(False) & ~vector_ran
    no_eligible = pl.col("plan_filter_eligible_sources") == 0
    outcome: Any = (
        pl.when(pl.col("passage_outcome") != "searched")
        .then(pl.struct(verdict=_text(FAILED), reason=failed_reason))
        .when(surfaces)
        .then(pl.struct(verdict=_text(SURFACED), reason=_text(surfaced_reason)))
        .when(pl.col("plan_context").is_null())
        .then(pl.struct(verdict=_text(UNDETERMINED), reason=_text(NO_PLAN)))
        .when(both_skipped)
        .then(pl.struct(verdict=_text(UNDETERMINED), reason=_text(LANES_SKIPPED)))
        .when(no_eligible.fill_null(False))
        .then(pl.struct(verdict=_text(UNDETERMINED), reason=_text(NO_ELIGIBLE_SOURCES)))
    )
    if rule == "semantic":
        outcome = outcome.when(~vector_ran).then(
            pl.struct(verdict=_text(UNDETERMINED), reason=_text(VECTOR_LANE_NOT_RUN))
        )
    bm25_only = pl.col("hits_served") - pl.col("vector_hits")
    return _verdict_frame(frame.with_columns(bm25_only.alias("bm25_only_hits")), outcome)


def _verdict_frame(frame: pl.DataFrame, outcome: Any) -> pl.DataFrame:
    """A probe rule's result: its ``when`` chain closed by "abstained" (the
    verdict that needs no reason), and the hit counts the artifact reports."""
    closed = outcome.otherwise(pl.struct(verdict=_text(ABSTAINED), reason=_text(None)))
    return frame.select(
        "case_index",
        closed.struct.field("verdict").alias("verdict"),
        closed.struct.field("reason").alias("reason"),
        "hits_served",
        "vector_hits",
        "bm25_only_hits",
    )


def _call_status(calls: pl.DataFrame, lane: str) -> pl.DataFrame:
    """``case_index`` -> the HTTP status of the case's ``lane`` call."""
    return (
        calls.filter(pl.col("lane") == lane)
        .group_by("case_index")
        .agg(pl.col("http_status").last().alias("passage_http_status"))
    )


def _failed_reason(status: pl.Expr) -> pl.Expr:
    """A 2xx answer that could not be used, or a request that failed."""
    return (
        pl.when(status.is_between(200, 299))
        .then(_text(UNPARSEABLE_RESPONSE))
        .otherwise(_text(REQUEST_FAILED))
    )


def evidence_rule(
    outcomes: pl.DataFrame,
    items: pl.DataFrame,
    calls: pl.DataFrame,
    rule: RefusalRule,
    vectors_ready: bool,
) -> pl.DataFrame:
    """The evidence-probe verdict of each row of ``outcomes`` (§3.5, ``--assembly``).

    ``outcomes`` has ``case_index``, ``evidence_outcome`` and the package's
    ``omitted_total``; ``items`` the same population's ``evidence_items``
    rows; ``vectors_ready`` is whether the embeddings status showed ready
    passage vectors. Under ``semantic`` an admitted association or community
    item, or an admitted passage item with vector evidence, surfaces; a
    package the budget cut (``omitted_total > 0``) or a server without ready
    passage vectors cannot judge. Under ``any`` any admitted item surfaces, and
    so does a budget that hid candidates (``budget_hid``): ``max_items: 0``
    is never an abstention. Same columns as :func:`passage_rule`
    (``hits_served`` counts admitted items).
    """
    admitted = items.filter(pl.col("admitted").fill_null(False))
    vector_lane = (
        pl.col("lane_ranks")
        .list.eval(pl.element().struct.field("lane").is_in(VECTOR_EVIDENCE_LANES))
        .list.any()
        .fill_null(False)
    )
    passage = pl.col("kind") == "passage"
    counts = admitted.group_by("case_index").agg(
        pl.len().cast(pl.Int64).alias("hits_served"),
        (passage & vector_lane).sum().cast(pl.Int64).alias("vector_hits"),
        (passage & ~vector_lane).sum().cast(pl.Int64).alias("bm25_only_hits"),
        pl.col("kind").is_in(GRAPH_ITEM_KINDS).sum().cast(pl.Int64).alias("graph_items"),
    )
    frame = (
        outcomes.select("case_index", "evidence_outcome", "omitted_total")
        .join(counts, on="case_index", how="left")
        .join(_call_status(calls, "evidence"), on="case_index", how="left")
        .with_columns(
            pl.col("hits_served", "vector_hits", "bm25_only_hits", "graph_items").fill_null(0),
            pl.col("omitted_total").fill_null(0),
        )
    )
    omitted = pl.col("omitted_total") > 0
    outcome: Any = pl.when(pl.col("evidence_outcome") != "assembled").then(
        pl.struct(verdict=_text(FAILED), reason=_failed_reason(pl.col("passage_http_status")))
    )
    if rule == "semantic":
        outcome = (
            outcome.when(pl.col("graph_items") > 0)
            .then(pl.struct(verdict=_text(SURFACED), reason=_text(EVIDENCE_GRAPH_ITEM)))
            .when(pl.col("vector_hits") > 0)
            .then(pl.struct(verdict=_text(SURFACED), reason=_text(EVIDENCE_VECTOR_PASSAGE)))
            .when(pl.lit(not vectors_ready))
            .then(pl.struct(verdict=_text(UNDETERMINED), reason=_text(PASSAGE_VECTORS_NOT_READY)))
            .when(omitted)
            .then(pl.struct(verdict=_text(UNDETERMINED), reason=_text(BUDGET_OMITTED)))
        )
    else:
        outcome = (
            outcome.when(pl.col("hits_served") > 0)
            .then(pl.struct(verdict=_text(SURFACED), reason=_text(EVIDENCE_ITEM)))
            .when(omitted)
            .then(pl.struct(verdict=_text(SURFACED), reason=_text(BUDGET_HID)))
        )
    return _verdict_frame(frame, outcome)


@dataclass(frozen=True)
class ProbeRule:
    """How a run's passage-side probes are judged: ``--refusal-rule``, and under
    ``--assembly`` the evidence rule with the run's passage-vector readiness
    (``vectors_ready`` None: baseline, the passage rule)."""

    rule: RefusalRule
    vectors_ready: bool | None = None

    def judge(
        self,
        lanes: pl.DataFrame,
        tables: RunTables,
        *,
        omitted_total: str = "omitted_total",
    ) -> pl.DataFrame:
        """The passage- or evidence-probe verdicts of ``lanes`` (one population's
        lane table) over ``tables`` (the same population's rows)."""
        if self.vectors_ready is None:
            return passage_rule(lanes, tables.hits, tables.calls, self.rule)
        outcomes = lanes.select(
            "case_index", "evidence_outcome", pl.col(omitted_total).alias("omitted_total")
        )
        return evidence_rule(
            outcomes, tables.evidence_items, tables.calls, self.rule, self.vectors_ready
        )


def structural_rule(lanes: pl.DataFrame, resolutions: pl.DataFrame) -> pl.DataFrame:
    """The structural-probe verdict of each case with cues (§3.5): surfaced when
    any cue resolved to a name, failed when a resolve call failed and none
    surfaced, abstained when every cue resolved to nothing; null without cues."""
    per_case = resolutions.group_by("case_index").agg(
        pl.col("cue_index").filter(pl.col("name").is_not_null()).n_unique().alias("cues_surfaced"),
        pl.col("cue_index").filter(pl.col("error").is_not_null()).n_unique().alias("cues_failed"),
    )
    frame = (
        lanes.select("case_index", "structural_ran")
        .join(per_case, on="case_index", how="left")
        .with_columns(pl.col("cues_surfaced", "cues_failed").fill_null(0).cast(pl.Int64))
    )
    ran = pl.col("structural_ran").fill_null(False)
    outcome = (
        pl.when(~ran)
        .then(pl.struct(verdict=_text(None), reason=_text(None)))
        .when(pl.col("cues_surfaced") > 0)
        .then(pl.struct(verdict=_text(SURFACED), reason=_text(STRUCTURAL_CANDIDATE)))
        .when(pl.col("cues_failed") > 0)
        .then(pl.struct(verdict=_text(FAILED), reason=_text(RESOLVE_FAILED)))
        .otherwise(pl.struct(verdict=_text(ABSTAINED), reason=_text(None)))
    )
    return frame.select(
        "case_index",
        outcome.struct.field("verdict").alias("structural_verdict"),
        outcome.struct.field("reason").alias("structural_reason"),
        pl.when(ran).then(pl.col("cues_surfaced")).alias("cues_surfaced"),
        pl.when(ran).then(pl.col("cues_failed")).alias("cues_failed"),
    )


def refusal_cases(must_refuse: RunTables, rule: ProbeRule) -> pl.DataFrame:
    """The ``refusal_cases`` table: one row per must-refuse case with its verdicts.

    ``must_refuse`` holds the must-refuse population's rows
    (:meth:`RunTables.of_population`). The case verdict is an AND over the
    probes that ran: surfaced if any surfaced, else failed if any failed, else
    undetermined if any could not judge, else abstained.
    """
    lanes = must_refuse.refusal_lanes
    probe = "passage" if rule.vectors_ready is None else "evidence"
    passage = rule.judge(lanes, must_refuse).rename(
        {"verdict": "passage_verdict", "reason": "passage_reason"}
    )
    structural = structural_rule(lanes, must_refuse.resolutions)
    frame = (
        lanes.select("run_id", "case_index", "case_id", "kind")
        .join(passage, on="case_index", how="left")
        .join(structural, on="case_index", how="left")
    )
    p_verdict, s_verdict = pl.col("passage_verdict"), pl.col("structural_verdict")
    outcome = (
        pl.when(p_verdict == SURFACED)
        .then(pl.struct(verdict=_text(SURFACED), reason="passage_reason", by=_text(probe)))
        .when(s_verdict == SURFACED)
        .then(
            pl.struct(verdict=_text(SURFACED), reason="structural_reason", by=_text("structural"))
        )
        .when(p_verdict == FAILED)
        .then(pl.struct(verdict=_text(FAILED), reason="passage_reason", by=_text(None)))
        .when(s_verdict == FAILED)
        .then(pl.struct(verdict=_text(FAILED), reason="structural_reason", by=_text(None)))
        .when(p_verdict == UNDETERMINED)
        .then(pl.struct(verdict=_text(UNDETERMINED), reason="passage_reason", by=_text(None)))
        .otherwise(pl.struct(verdict=_text(ABSTAINED), reason=_text(None), by=_text(None)))
    )
    verdicts = frame.with_columns(
        outcome.struct.field("verdict").alias("verdict"),
        outcome.struct.field("reason").alias("reason"),
        outcome.struct.field("by").alias("surfaced_by"),
    ).sort("case_index")
    return conform(verdicts, REFUSAL_CASES)


def offered(verdict: pl.Expr) -> pl.Expr:
    """``offered`` of an answerable case from its verdict: did not abstain, for a
    determinate verdict; null otherwise."""
    return pl.when(verdict.is_in(DETERMINATE)).then(verdict == SURFACED)


def answerability(cases: pl.DataFrame, eval_tables: RunTables, rule: ProbeRule) -> pl.DataFrame:
    """``cases`` with its answerability columns filled (§3.7).

    The answerable population is the recall population: a case with a recall
    block (a declared relevant source and a completed passage lane). Each gets
    the must-refuse probes' rule over its own served hits (under ``--assembly``
    its own evidence package); ``offered`` is "did not
    abstain" for a determinate verdict (null otherwise) and ``supported`` is
    "the served hits matched an expected source".
    """
    verdicts = rule.judge(
        eval_tables.case_lanes, eval_tables, omitted_total="budget_omitted_total"
    ).select(
        "case_index",
        pl.col("verdict").alias("_verdict"),
        pl.col("reason").alias("_reason"),
    )
    answerable = pl.col("recall_expected_total").is_not_null()
    verdict = pl.col("_verdict")
    return (
        cases.join(verdicts, on="case_index", how="left")
        .with_columns(
            pl.when(answerable).then(verdict).alias("answerability_verdict"),
            pl.when(answerable).then(pl.col("_reason")).alias("answerability_reason"),
            pl.when(answerable).then(offered(verdict)).alias("offered"),
            pl.when(answerable).then(pl.col("recall_matched").fill_null(0) > 0).alias("supported"),
        )
        .drop("_verdict", "_reason")
    )


@dataclass(frozen=True)
class _Population:
    """One metric's denominator (``among``) and numerator (``counts``) over a frame."""

    among: pl.Expr
    counts: pl.Expr


def _refusal_populations() -> dict[str, _Population]:
    verdict = pl.col("verdict")
    determinate = verdict.is_in(DETERMINATE)
    abstained = verdict == ABSTAINED

    def refused(column: str) -> _Population:
        return _Population(pl.col(column).is_in(DETERMINATE), pl.col(column) == ABSTAINED)

    return {
        "abstention.refusal_rate": _Population(determinate, abstained),
        "abstention.false_answers": _Population(determinate, verdict == SURFACED),
        "abstention.passage.refusal_rate": refused("passage_verdict"),
        "abstention.structural.refusal_rate": refused("structural_verdict"),
        "abstention.out_of_corpus.refusal_rate": _Population(
            determinate & (pl.col("kind") == "out_of_corpus"), abstained
        ),
        "abstention.adjacent.refusal_rate": _Population(
            determinate & (pl.col("kind") == "adjacent"), abstained
        ),
        "abstention.undetermined_rate": _Population(pl.lit(True), verdict == UNDETERMINED),
        "abstention.failure_rate": _Population(pl.lit(True), verdict == FAILED),
    }


def _answerable_populations() -> dict[str, _Population]:
    verdict = pl.col("answerability_verdict")
    answerable = verdict.is_not_null()
    determinate = verdict.is_in(DETERMINATE)
    offered = pl.col("offered").fill_null(False)
    supported = pl.col("supported").fill_null(False)
    abstained = verdict == ABSTAINED
    return {
        "answerability.offered_rate": _Population(determinate, offered),
        "answerability.supported_rate": _Population(determinate, offered & supported),
        "answerability.unsupported_offer_rate": _Population(determinate, offered & ~supported),
        "answerability.false_refusal_rate": _Population(determinate, abstained),
        "answerability.supported_when_offered": _Population(offered, supported),
        "answerability.refused_with_expected_present": _Population(abstained, supported),
        "answerability.undetermined_rate": _Population(answerable, verdict == UNDETERMINED),
    }


def _members(frame: pl.DataFrame, populations: dict[str, _Population]) -> list[pl.DataFrame]:
    return [
        frame.filter(population.among.fill_null(False)).select(
            pl.lit(metric).alias("metric"),
            pl.col("case_index"),
            pl.col("case_id"),
            population.counts.fill_null(False).alias("counted"),
        )
        for metric, population in populations.items()
    ]


def membership(refusals: pl.DataFrame, cases: pl.DataFrame) -> pl.DataFrame:
    """Every ``abstention.*`` / ``answerability.*`` metric's denominator, one
    row per case in it, with whether it counts toward the numerator (must-refuse
    cases first, then eval cases, each in file order)."""
    parts = [
        *_members(refusals, _refusal_populations()),
        *_members(cases, _answerable_populations()),
    ]
    return pl.concat(
        [part.cast(MEMBERSHIP_SCHEMA) for part in parts],  # type: ignore[arg-type]
        how="vertical",
    )


def membership_metrics(members: pl.DataFrame) -> dict[str, dict[str, Any]]:
    """The metric values (``ABSTENTION_METRICS``' shapes) from :func:`membership`.

    A ratio is taguru's ``{value, n, numerator}``; a count is ``{value, n}``
    with ``value`` the numerator. Both are null-valued when ``n`` is 0.
    """
    tallies = {
        metric: (n, counted)
        for metric, n, counted in members.group_by("metric")
        .agg(pl.len().alias("n"), pl.col("counted").sum().alias("counted"))
        .iter_rows()
    }
    metrics: dict[str, dict[str, Any]] = {}
    for name, definition in ABSTENTION_METRICS.items():
        n, counted = tallies.get(name, (0, 0))
        if definition.statistic == COUNT:
            metrics[name] = {"value": float(counted) if n else None, "n": n}
        else:
            metrics[name] = dict(ratio(int(counted), int(n)))
    return metrics


def effective_floors(*lanes: pl.DataFrame) -> list[float]:
    """The distinct effective vector floors the server reported across lane
    tables (``case_lanes``, ``refusal_lanes``), ascending. More than one means
    the two populations (or two probes) were judged under different bars."""
    floors = pl.concat(
        [frame.select(pl.col("plan_vector_floor").cast(pl.Float32)) for frame in lanes]
    )
    return sorted(floors.drop_nulls().unique().get_column("plan_vector_floor").to_list())

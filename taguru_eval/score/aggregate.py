"""The run's aggregate metrics (EVALUATE.md §5.2) from the per-case frame and the tables.

Every Distribution goes through :mod:`.stats`; a metric's statistic comes
from the catalog."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from taguru_eval.catalog import CATALOG, UNSTABLE_RATE, Catalog, catalog_for
from taguru_eval.options import RefusalRule
from taguru_eval.score.abstention import (
    MEMBERSHIP_SCHEMA,
    ProbeRule,
    answerability,
    membership,
    membership_metrics,
    refusal_cases,
)
from taguru_eval.score.answers import with_answer_columns
from taguru_eval.score.blocks import POSITIONS
from taguru_eval.score.cases import score_cases
from taguru_eval.score.match import HasExpected
from taguru_eval.score.stability import stability, unstable_rate, with_stability
from taguru_eval.score.stats import (
    DISTRIBUTION_KEYS,
    distribution_frame,
    ratio,
    saturated_ratio,
)
from taguru_eval.tables.schemas import (
    POPULATION_EVAL,
    POPULATION_MUST_REFUSE,
    TABLE,
    RunTables,
    cases_polars,
    conform,
    metrics_frame,
)


@dataclass(frozen=True)
class Scores:
    """The per-case frame (``cases``) and the aggregate metrics of one run.

    With ``--must-refuse`` also ``refusal_cases`` (one row per must-refuse
    case) and ``membership`` (each abstention/answerability metric's cases,
    :func:`taguru_eval.score.abstention.membership`); both are empty otherwise.
    ``catalog`` is the catalog the metrics were measured with.
    """

    cases: pl.DataFrame
    metrics: dict[str, dict[str, Any]]
    metrics_frame: pl.DataFrame
    refusal_cases: pl.DataFrame = field(default_factory=TABLE["refusal_cases"].empty)
    membership: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(schema=MEMBERSHIP_SCHEMA))
    catalog: Catalog = field(default_factory=lambda: CATALOG, compare=False)

    def frames(self) -> dict[str, pl.DataFrame]:
        """The tables the scorer adds, by table name (the run store writes them)."""
        return {
            "cases": self.cases,
            "metrics": self.metrics_frame,
            "refusal_cases": self.refusal_cases,
        }


def _samples(metric: str, frame: pl.DataFrame, column: str) -> pl.DataFrame:
    return frame.select(
        pl.lit(metric).alias("metric"), pl.col(column).cast(pl.Float64).alias("sample")
    )


def aggregate(
    cases: pl.DataFrame,
    tables: RunTables,
    *,
    rerank_requested: bool = False,
    metric_catalog: Catalog = CATALOG,
    measured: Mapping[str, Mapping[str, Any]] | None = None,
) -> dict[str, dict[str, Any]]:
    """Every metric of the catalog (keys ascending), from the per-case frame and the tables.

    ``measured`` holds run-scope values computed elsewhere (the must-refuse
    metrics, :mod:`.abstention`), taken as they are.
    """
    cue_latencies = tables.resolutions.unique(["case_index", "cue_index"], keep="first")
    probes = tables.probes
    checks = tables.citation_checks
    position_latencies = pl.concat(
        [
            probes.select(pl.col(f"{position}_latency_ms").alias("latency_ms"))
            for position in POSITIONS
        ]
    )
    # A per-case distribution samples its cases column; the latencies of calls
    # a case makes several of sample the tables those calls landed in.
    per_case = [
        _samples(name, cases, case_field.column)
        for name, case_field in metric_catalog.per_case.items()
        if metric_catalog[name].statistic == "distribution"
    ]
    samples = pl.concat(
        [
            *per_case,
            _samples("latency.resolve_ms", cue_latencies, "latency_ms"),
            _samples("latency.resolve_ms", position_latencies, "latency_ms"),
            _samples(
                "latency.query_ms",
                probes.filter(pl.col("query_outcome").is_not_null()),
                "query_latency_ms",
            ),
            _samples("latency.citation_ms", checks, "latency_ms"),
        ]
    ).filter(pl.col("sample").is_not_null())
    distributions = {
        row["metric"]: {key: row[key] for key in DISTRIBUTION_KEYS}
        for row in distribution_frame(samples, "sample", ["metric"]).iter_rows(named=True)
    }

    def count(frame: pl.DataFrame, predicate: pl.Expr) -> int:
        return int(frame.select(predicate.fill_null(False).sum()).item())

    lane_cross = cases.filter(pl.col("lane_cross_structural_hit").is_not_null())
    structural_hit = pl.col("lane_cross_structural_hit")
    passage_hit = pl.col("lane_cross_passage_hit")
    resolved = pl.col("outcome") == "resolved"
    unresolved = pl.col("outcome") == "unresolved"
    code = pl.col("code")
    section_declared = resolved & pl.col("section_check").is_in(["matched", "mismatched"])
    quote_declared = resolved & pl.col("quote_declared").is_not_null()
    lanes = tables.case_lanes
    budgeted = lanes.filter(pl.col("budget_items_used").is_not_null())
    # Summed as Python integers: int64 sums would wrap once taguru's u64 counts
    # (saturated at I64_MAX in the tables) add up past int64.
    budget_numerator = sum(budgeted["budget_omitted_by_budget"].fill_null(0).to_list())
    budget_denominator = sum(
        omitted + used
        for omitted, used in zip(
            budgeted["budget_omitted_total"].to_list(),
            budgeted["budget_items_used"].to_list(),
            strict=True,
        )
        if omitted is not None and used is not None
    )
    rerank_population = (
        lanes.filter(
            (pl.col("evidence_outcome") == "assembled")
            & (pl.col("reranker_reason").fill_null("") != "empty_pool")
        )
        if rerank_requested
        else lanes.clear()
    )
    ratios = {
        "passage.failure_rate": ratio(
            count(cases, pl.col("passage_outcome") == "failed"), cases.height
        ),
        "structural.case_rate": ratio(count(cases, pl.col("structural_ran")), cases.height),
        "citations.resolved": ratio(count(checks, resolved), checks.height),
        "citations.no_source": ratio(
            count(checks, unresolved & (code == "no_source")), checks.height
        ),
        "citations.no_paragraph": ratio(
            count(checks, unresolved & (code == "no_paragraph")), checks.height
        ),
        "citations.other": ratio(
            count(
                checks,
                unresolved & (code.is_null() | ~code.is_in(["no_source", "no_paragraph"])),
            ),
            checks.height,
        ),
        "citations.section_match": ratio(
            count(checks, section_declared & (pl.col("section_check") == "matched")),
            count(checks, section_declared),
        ),
        "citations.quote_match": ratio(
            count(checks, quote_declared & pl.col("quote_matched")), count(checks, quote_declared)
        ),
        "lanes.structural_hit": ratio(count(lane_cross, structural_hit), lane_cross.height),
        "lanes.passage_hit": ratio(count(lane_cross, passage_hit), lane_cross.height),
        "lanes.both": ratio(count(lane_cross, structural_hit & passage_hit), lane_cross.height),
        "lanes.neither": ratio(
            count(lane_cross, ~structural_hit & ~passage_hit), lane_cross.height
        ),
        "budget.omitted_rate": saturated_ratio(budget_numerator, budget_denominator),
        "rerank.ran": ratio(
            count(rerank_population, pl.col("reranker_ran")), rerank_population.height
        ),
    }
    empty = {key: None for key in DISTRIBUTION_KEYS} | {"n": 0}
    metrics: dict[str, dict[str, Any]] = {}
    for name, statistic in sorted(metric_catalog.statistics().items()):
        if statistic == "distribution":
            metrics[name] = dict(distributions.get(name, empty))
        elif name in ratios:
            metrics[name] = dict(ratios[name])
        elif measured is not None and name in measured:
            metrics[name] = dict(measured[name])
        else:
            raise KeyError(f"no aggregation for catalog metric {name!r}")
    unknown = (set(distributions) | set(ratios)) - set(metrics)
    if unknown:
        raise KeyError(f"aggregated metrics missing from the catalog: {sorted(unknown)}")
    return metrics


def case_metrics(
    eval_set: HasExpected,
    eval_tables: RunTables,
    catalog: Catalog,
    answers_declared: Mapping[str, int] | None = None,
) -> pl.DataFrame:
    """The per-case frame of the eval population: every per-case metric, the
    answers columns too for a run given ``--answers`` (a repetition of the cases,
    ``run --repeat``, is scored by this same step)."""
    cases = score_cases(eval_set, eval_tables)
    if answers_declared is None:
        return cases
    return conform(
        with_answer_columns(cases, eval_tables.answer_checks, answers_declared),
        cases_polars(catalog),
    )


def score_run(
    eval_set: HasExpected,
    tables: RunTables,
    *,
    rerank_requested: bool = False,
    refusal_rule: RefusalRule | None = None,
    vectors_ready: bool | None = None,
    answers_declared: Mapping[str, int] | None = None,
    repetitions: Iterable[RunTables] | None = None,
) -> Scores:
    """Score a run: the per-case frame plus every aggregate metric of the catalog.

    ``refusal_rule`` (a run given ``--must-refuse``) adds the must-refuse
    verdicts, the answerability columns of ``cases`` and the abstention and
    answerability metrics; the eval population is scored exactly as without it.
    ``vectors_ready`` is for an ``--assembly`` run (None in baseline): whether
    the embeddings status showed ready passage vectors (ABSTENTION.md §3.5).
    ``answers_declared`` (a run given ``--answers``: each listed case's number
    of answers) adds the answers columns and the ``answers.*`` metrics.
    ``repetitions`` (``run --repeat N``: the tables of repetitions 2..N, taken one
    at a time; ``tables`` is the first's) adds the stability columns of ``cases``
    and ``stability.unstable_rate``; every other value is the first repetition's.
    """
    catalog = catalog_for(
        must_refuse=refusal_rule is not None,
        answers=answers_declared is not None,
        stability=repetitions is not None,
    )
    eval_tables = tables.of_population(POPULATION_EVAL)
    cases = case_metrics(eval_set, eval_tables, catalog, answers_declared)
    measured: dict[str, Mapping[str, Any]] = {}
    if repetitions is not None:
        # Each repetition's tables are let go once its per-case frame is made.
        again = []
        for other in repetitions:
            again.append(
                case_metrics(
                    eval_set, other.of_population(POPULATION_EVAL), catalog, answers_declared
                )
            )
            del other
        cases = conform(
            with_stability(cases, stability(cases, again, catalog)), cases_polars(catalog)
        )
        measured[UNSTABLE_RATE] = unstable_rate(cases)
    if refusal_rule is None:
        metrics = aggregate(
            cases,
            eval_tables,
            rerank_requested=rerank_requested,
            metric_catalog=catalog,
            measured=measured,
        )
        return Scores(
            cases,
            metrics,
            metrics_frame(metrics, tables.run_id, catalog.statistics()),
            catalog=catalog,
        )
    rule = ProbeRule(refusal_rule, vectors_ready)
    cases = conform(answerability(cases, eval_tables, rule), cases_polars(catalog))
    refusals = refusal_cases(tables.of_population(POPULATION_MUST_REFUSE), rule)
    members = membership(refusals, cases)
    metrics = aggregate(
        cases,
        eval_tables,
        rerank_requested=rerank_requested,
        metric_catalog=catalog,
        measured={**membership_metrics(members), **measured},
    )
    return Scores(
        cases=cases,
        metrics=metrics,
        metrics_frame=metrics_frame(metrics, tables.run_id, catalog.statistics()),
        refusal_cases=refusals,
        membership=members,
        catalog=catalog,
    )


def lane_cross_line(metrics: dict[str, dict[str, Any]]) -> str | None:
    """The §3.9 cross-tab console line, or None when no case is in the population."""
    both = metrics["lanes.both"]
    if not both["n"]:
        return None
    neither = metrics["lanes.neither"]["numerator"]
    return (
        f"  lane cross-tab over {both['n']} case(s) declaring both a structural and a source "
        f"expectation (passage lane completed): {both['numerator']} both, {neither} neither"
    )

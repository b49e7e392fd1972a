"""The network half of ``refusal-bands`` (ABSTENTION.md §3.12): one sweep search per case.

Every answerable eval case and every must-refuse case is searched once with
the sweep floor (0.05) and a wide window, through the passage lane's own
request builder and decoder; nothing else is called. The cosines it reads are
for a report only — the gate never reads a score (:mod:`taguru_eval.score.bands`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

import polars as pl

from taguru_eval.inputs.dataset import CaseOptions, EvalCase
from taguru_eval.inputs.must_refuse import MustRefuseCase
from taguru_eval.run.bounded import in_order
from taguru_eval.run.http import TaguruClient
from taguru_eval.run.lanes.passage import passage_lane
from taguru_eval.run.lanes.record import CallRecorder
from taguru_eval.tables.schemas import POPULATION_EVAL, POPULATION_MUST_REFUSE

SWEEP_FLOOR: Final = 0.05
"""The floor every sweep search asks for: low enough that the server reports
nearly every paragraph's cosine, as calibrate's sweep does for glosses."""

SWEEP_HITS_SCHEMA: Final = {
    "population": pl.String,
    "case_index": pl.Int32,
    "case_id": pl.String,
    "rank": pl.Int32,
    "source": pl.String,
    "paragraph": pl.Int64,
    "vector_score": pl.Float32,
}
SWEEP_PLANS_SCHEMA: Final = {
    "population": pl.String,
    "case_index": pl.Int32,
    "case_id": pl.String,
    "outcome": pl.String,
    "vector_ran": pl.Boolean,
    "vector_reason": pl.String,
    "message": pl.String,
}


@dataclass(frozen=True, slots=True)
class SweepRequest:
    """One case's query and filters with the sweep floor and window."""

    query: str
    options: CaseOptions
    effective_limit: int


def sweep_request(case: EvalCase | MustRefuseCase, window: int) -> SweepRequest:
    options = case.options
    return SweepRequest(
        query=case.query,
        options=CaseOptions(
            limit=window,
            floor=SWEEP_FLOOR,
            tags=options.tags,
            since=options.since,
            until=options.until,
        ),
        effective_limit=window,
    )


@dataclass(frozen=True)
class Sweep:
    """What the sweep searches returned: one plan row per case, one row per hit."""

    plans: pl.DataFrame
    hits: pl.DataFrame


async def sweep(
    client: TaguruClient,
    context: str,
    eval_cases: Sequence[EvalCase],
    must_refuse: Sequence[MustRefuseCase],
    window: int,
    concurrency: int,
) -> Sweep:
    """Search every answerable eval case (one declaring a relevant source) and
    every must-refuse case once at the sweep floor; ``case_index`` is each
    case's position in its own file."""
    jobs: list[tuple[str, int, EvalCase | MustRefuseCase]] = [
        *(
            (POPULATION_EVAL, index, case)
            for index, case in enumerate(eval_cases)
            if case.declares_source_expectation
        ),
        *((POPULATION_MUST_REFUSE, index, case) for index, case in enumerate(must_refuse)),
    ]

    async def search(
        _position: int, job: tuple[str, int, EvalCase | MustRefuseCase]
    ) -> tuple[dict[str, object], list[dict[str, object]]]:
        population, index, case = job
        recorder = CallRecorder(index, case.case_id)
        outcome, _usage, _checks = await passage_lane(
            client, context, sweep_request(case, window), recorder
        )
        vector = outcome.get("plan", {}).get("lanes", {}).get("vector", {})
        plan = {
            "population": population,
            "case_index": index,
            "case_id": case.case_id,
            "outcome": outcome["outcome"],
            "vector_ran": vector.get("ran"),
            "vector_reason": vector.get("reason"),
            "message": outcome.get("message"),
        }
        hits: list[dict[str, object]] = [
            {
                "population": population,
                "case_index": index,
                "case_id": case.case_id,
                "rank": rank,
                "source": hit["source"],
                "paragraph": hit["paragraph"],
                "vector_score": hit["lanes"].get("vector", {}).get("score"),
            }
            for rank, hit in enumerate(outcome.get("hits", []))
        ]
        return plan, hits

    results = await in_order(jobs, search, concurrency)
    plans = pl.DataFrame([plan for plan, _hits in results], schema=SWEEP_PLANS_SCHEMA)
    hits = pl.DataFrame([hit for _plan, rows in results for hit in rows], schema=SWEEP_HITS_SCHEMA)
    return Sweep(plans=plans, hits=hits)

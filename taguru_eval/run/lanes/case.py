"""One eval case: its lanes in the documented order (EVALUATE.md §3.3–§3.6).

The passage lane (or, with ``--assembly``, the evidence lane), then, when
declared, the structural lane — coverage cues, then association probes —
then the served set, then the citation lane. Every HTTP call becomes one
call record; the lane results are evaluation.json's own shapes. Nothing here
computes a metric: the scorer reads the :class:`LaneOutput`.
"""

from __future__ import annotations

from taguru_eval.inputs.dataset import EvalCase
from taguru_eval.run.http import TaguruClient
from taguru_eval.run.lanes.answers import AnswerJudge
from taguru_eval.run.lanes.citations import citation_lane, served_set
from taguru_eval.run.lanes.evidence import Retrieval, retrieve
from taguru_eval.run.lanes.record import CallRecorder
from taguru_eval.run.lanes.structural import structural_lane
from taguru_eval.tables.shapes import LaneOutput


async def run_case(
    client: TaguruClient,
    context: str,
    case_index: int,
    case: EvalCase,
    how: Retrieval = None,
    judge: AnswerJudge | None = None,
) -> LaneOutput:
    """All lanes of one case, in the documented order; never raises for a lane failure.

    ``how`` runs the first lane: a search, truncated to a budget, or the evidence lane;
    ``judge`` (a case the answers file lists) checks its answers on the window.
    """
    recorder = CallRecorder(case_index, case.case_id)
    retrieved = await retrieve(client, context, case, recorder, how, judge)
    passage = retrieved.passage
    structural = (
        await structural_lane(client, context, case, recorder)
        if case.runs_structural_lane
        else None
    )
    served = served_set(passage, structural)
    checks = await citation_lane(client, context, case.expected_citations, served, recorder)
    output = LaneOutput(
        case_index=case_index,
        case_id=case.case_id,
        query=case.query,
        cues=list(case.cues),
        limit=case.effective_limit,
        tags=list(case.options.tags),
        passage=passage,
        checks=checks,
        calls=recorder.calls,
    )
    if structural is not None:
        output["structural"] = structural
    if retrieved.evidence is not None:
        output["evidence"] = retrieved.evidence.evidence
        output["evidence_rows"] = retrieved.evidence.rows
    if retrieved.budget is not None:
        output["budget"] = retrieved.budget
    if retrieved.answer_checks is not None:
        output["answer_checks"] = retrieved.answer_checks
    return output

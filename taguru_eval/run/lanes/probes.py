"""The must-refuse probe lane (ABSTENTION.md §3.4): one probe set per must-refuse case.

Per case, in a fixed order and with no probe feeding another: the passage
probe (``POST …/sources/search`` with the case's query, limit and options —
the eval passage lane's own request builder, decoder and budget) or, under
``--assembly``, the evidence probe (``POST …/evidence`` with exactly the body
the eval evidence lane sends, decoded by it), then, when the case declares
cues, the structural probe (``POST …/resolve {cue, limit: 5}`` per cue, the
server's floors, every candidate kept with its tier and match kind). The
runner calls :func:`run_probes` after every eval case and before the closing
context read, so the revision bracket covers the probes and they cannot seed
a semantic cache for an eval case.

Nothing here judges: the verdicts are the scorer's (:mod:`taguru_eval.score.abstention`).
"""

from __future__ import annotations

from collections.abc import Sequence

from taguru_eval import contract
from taguru_eval.inputs.must_refuse import MustRefuseCase
from taguru_eval.run.bounded import in_order
from taguru_eval.run.console import Progress
from taguru_eval.run.http import CallFailure, TaguruClient
from taguru_eval.run.lanes.evidence import Retrieval, retrieve
from taguru_eval.run.lanes.record import CallRecorder
from taguru_eval.run.lanes.structural import resolve_call
from taguru_eval.tables.shapes import CueProbe, RefusalOutput, ResolveCandidate


async def probe_case(
    client: TaguruClient,
    context: str,
    case_index: int,
    case: MustRefuseCase,
    how: Retrieval = None,
) -> RefusalOutput:
    """Every probe of one must-refuse case; a failed call is recorded, never raised.

    ``how`` runs the passage probe as the eval cases' first lane runs (a budget
    truncates its hits; an assembly swaps it for the evidence probe).
    """
    recorder = CallRecorder(case_index, case.case_id)
    retrieved = await retrieve(client, context, case, recorder, how)
    cue_probes = [
        await _cue_probe(client, context, index, cue, recorder)
        for index, cue in enumerate(case.cues)
    ]
    output = RefusalOutput(
        case_index=case_index,
        case_id=case.case_id,
        query=case.query,
        cues=list(case.cues),
        kind=case.kind,
        limit=case.effective_limit,
        passage=retrieved.passage,
        cue_probes=cue_probes,
        calls=recorder.calls,
    )
    evidence = retrieved.evidence
    if evidence is not None:
        output["evidence"] = evidence.evidence
        output["evidence_rows"] = evidence.rows
        if evidence.budget is not None:
            output["budget"] = evidence.budget
    if case.why is not None:
        output["why"] = case.why
    if case.options.floor is not None:
        output["floor"] = case.options.floor
    return output


async def _cue_probe(
    client: TaguruClient, context: str, index: int, cue: str, recorder: CallRecorder
) -> CueProbe:
    resolved = await resolve_call(client, context, "resolve", cue)
    if isinstance(resolved, CallFailure):
        message = recorder.failed(resolved, "structural", contract.RESOLVE, index)
        return CueProbe(cue=cue, candidates=[], latency_ms=resolved.latency_ms, error=message)
    result, candidates = resolved
    recorder.add(
        lane="structural",
        endpoint=contract.RESOLVE,
        item_index=index,
        outcome="resolved" if candidates else "not_found",
        latency_ms=result.latency_ms,
        http_status=result.status,
    )
    served: list[ResolveCandidate] = []
    for candidate in candidates:
        entry = ResolveCandidate(name=candidate.name, tier=candidate.tier)
        if candidate.kind is not None:
            entry["kind"] = candidate.kind
        served.append(entry)
    return CueProbe(cue=cue, candidates=served, latency_ms=result.latency_ms)


async def run_probes(
    client: TaguruClient,
    context: str,
    cases: Sequence[MustRefuseCase],
    concurrency: int,
    progress: Progress | None = None,
    how: Retrieval = None,
) -> list[RefusalOutput]:
    """Every must-refuse case's probes, at most ``concurrency`` cases in flight
    (the eval cases' bound), results in file order."""

    async def probe(index: int, case: MustRefuseCase) -> RefusalOutput:
        return await probe_case(client, context, index, case, how)

    return await in_order(cases, probe, concurrency, progress)

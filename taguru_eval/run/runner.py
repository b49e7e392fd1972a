"""The network phase of a run (EVALUATE.md §2.3 steps 7–9, §3).

Prints the target line, probes the server version, runs the preflight,
brackets the cases with two context reads and runs the cases concurrently
under ``--concurrency``, each case's output handed on as it finishes. With
``--repeat N`` a case is sent N times in a row before its slot is free, so
every repetition lies inside the same bracket. Nothing here scores."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Protocol

from taguru_eval.inputs.dataset import EvalCase
from taguru_eval.inputs.prepare import PreparedRun
from taguru_eval.options import RunOptions
from taguru_eval.run.bounded import each_bounded
from taguru_eval.run.console import Console, Progress
from taguru_eval.run.http import TaguruClient, probe_version
from taguru_eval.run.lanes.answers import AnswerJudge
from taguru_eval.run.lanes.case import run_case
from taguru_eval.run.lanes.evidence import Assembly, Retrieval
from taguru_eval.run.lanes.probes import run_probes
from taguru_eval.run.preflight import ContextEntry, Preflight, preflight, read_context_after
from taguru_eval.tables.flatten import TableRows
from taguru_eval.tables.shapes import LaneOutput, RefusalOutput

if TYPE_CHECKING:
    import httpx


class Checkpoint(Protocol):
    """What the network phase needs of a run's checkpoint
    (:class:`taguru_eval.resume.Session`, a later stage)."""

    @property
    def done(self) -> Sequence[LaneOutput]: ...

    @property
    def sessions(self) -> int: ...

    def bracket(self, checked: Preflight) -> Preflight: ...

    def flush(self) -> None: ...


async def run_cases(
    client: TaguruClient,
    context: str,
    cases: Sequence[EvalCase],
    concurrency: int,
    on_finished: Callable[[LaneOutput], None],
    progress: Progress | None = None,
    how: Retrieval = None,
    done: Sequence[LaneOutput] = (),
    judges: Mapping[str, AnswerJudge] | None = None,
    repeat: int = 1,
    on_repeated: Callable[[int, LaneOutput], None] | None = None,
) -> int:
    """Every case's lanes, at most ``concurrency`` cases in flight; returns how many
    finished (``done``'s included).

    ``how`` runs each case's first lane (:data:`Retrieval`). Each case's output
    goes to ``on_finished`` the moment the case completes (the tables' rows and
    the case block's lane values are made from it while the other cases wait
    on the network) and is kept nowhere else: what the server sent outlives
    its case only as those. ``done``: the outputs of an unfinished run's cases
    (``--resume``); each goes to ``on_finished`` first, and only the other
    cases are sent. ``judges``: each case's answers (``--answers``), by case id.
    ``repeat``: how many times each case is sent (``--repeat``); the first
    repetition's output goes to ``on_finished``, every later one, with its
    0-based repetition, to ``on_repeated`` as it completes.
    """
    judge_of = judges or {}

    async def lanes(index: int, case: EvalCase) -> LaneOutput:
        judge = judge_of.get(case.case_id)
        output = await run_case(client, context, index, case, how, judge)
        # One after another within the case's slot: --concurrency keeps counting
        # cases in flight, and the server sees the same query again at once.
        for again in range(1, repeat):
            repeated = await run_case(client, context, index, case, how, judge)
            if on_repeated is not None:
                on_repeated(again, repeated)
        return output

    for output in done:
        on_finished(output)
    finished_indexes = {output["case_index"] for output in done}
    todo = [(index, case) for index, case in enumerate(cases) if index not in finished_indexes]
    shown = _shifted(progress, len(finished_indexes))
    ran = await each_bounded(todo, len(todo), lanes, concurrency, on_finished, shown)
    return ran + len(finished_indexes)


def _shifted(progress: Progress | None, replayed: int) -> Progress | None:
    """The display counts a resumed run's replayed cases as done."""
    if progress is None or not replayed:
        return progress
    shown = progress

    def shifted(done: int, total: int) -> None:
        shown(done + replayed, total + replayed)

    return shifted


def answer_judges(prepared: PreparedRun) -> dict[str, AnswerJudge]:
    """Each listed case's answers under the run's ``--answer-match`` (none without answers)."""
    if prepared.answers is None:
        return {}
    match = prepared.options.resolved_answer_match
    return {
        case_id: AnswerJudge(answers, match)
        for case_id, answers in prepared.answers.by_case.items()
    }


def retrieval(options: RunOptions) -> Retrieval:
    """How every case's first lane runs: the evidence lane with ``--assembly``, a
    search truncated client-side in a baseline run given ``--max-*``, else a search."""
    if options.assembly:
        return Assembly(options.budget, options.rerank)
    return options.budget if options.budget_given else None


@dataclass
class NetworkPhase:
    """Everything the network phase produced, before any scoring."""

    preflight: Preflight
    after: ContextEntry
    cases: int  # how many eval cases ran
    rows: TableRows  # their outputs as table rows, built while the cases ran
    started_at: datetime
    finished_at: datetime
    cases_elapsed_s: float  # wall time of the cases alone (monotonic clock)
    refusal_outputs: list[RefusalOutput] = field(default_factory=list)
    sessions: int = 1  # more than one: resumed (``inputs.resumed``)
    repeat: int = 1  # how many times every eval case was sent (``--repeat``)
    # The rows of repetitions 1..N-1 (``rows`` is the first's); the finishing
    # stages take them one by one (:meth:`take_repeated`).
    repeated: list[TableRows] = field(default_factory=list)

    def take_repeated(self) -> Iterator[TableRows]:
        """Each later repetition's rows, let go as they are taken: a repetition's
        tables are scored for stability and then dropped, so at most one of them
        is held at a time beside the first's."""
        while self.repeated:
            yield self.repeated.pop(0)

    @property
    def stable(self) -> bool:
        return self.preflight.before.revision == self.after.revision


async def network_phase(
    prepared: PreparedRun,
    *,
    console: Console,
    transport: httpx.AsyncBaseTransport | None = None,
    progress: Progress | None = None,
    on_finished: Callable[[LaneOutput], None] | None = None,
    session: Checkpoint | None = None,
) -> NetworkPhase:
    """§2.3 steps 7–9 and §3.1–§3.2: target line, probe, preflight, cases, re-read.

    With ``--must-refuse`` the probes (ABSTENTION.md §3.4) run after every eval
    case and before the re-read, so the revision bracket covers them too.
    Each eval case's output becomes table rows and goes to ``on_finished``
    as the case finishes; neither the phase nor its result keeps it.
    ``session`` keeps the run's checkpoint (:mod:`taguru_eval.resume`): it
    replaces a resumed run's first context read with the first session's, and
    its batch is written when the case phase ends, however it ends.
    """
    options = prepared.options
    console.err(f"evaluate → {prepared.masked_url}")
    async with TaguruClient(
        prepared.base_url,
        prepared.token,
        transport=transport,
        max_connections=max(1, options.concurrency),
        secrets=prepared.secrets,
        proxies=prepared.proxies,
    ) as client:
        warning = await probe_version(client)
        if warning is not None:
            console.err(warning)
        checked = await preflight(client, prepared, console.err)
        if session is not None:
            checked = session.bracket(checked)
        how = retrieval(options)
        rows = TableRows()  # before the clock: its first use has a one-time cost
        repeated = [TableRows(repeat=again) for again in range(1, options.repeat)]
        started = datetime.now(UTC)
        clock = time.monotonic()

        def collect(output: LaneOutput) -> None:
            rows.add(output)
            if on_finished is not None:
                on_finished(output)

        def collect_repeated(again: int, output: LaneOutput) -> None:
            repeated[again - 1].add(output)

        try:
            ran = await run_cases(
                client,
                options.context,
                prepared.eval_set.cases,
                options.concurrency,
                collect,
                progress,
                how,
                () if session is None else session.done,
                answer_judges(prepared),
                options.repeat,
                collect_repeated,
            )
        finally:
            if session is not None:
                session.flush()
        cases_elapsed = time.monotonic() - clock
        refusal_outputs = (
            []
            if prepared.must_refuse is None
            else await run_probes(
                client,
                options.context,
                prepared.must_refuse.cases,
                options.concurrency,
                how=how,
            )
        )
        after = await read_context_after(client, options.context)
        finished = datetime.now(UTC)
    return NetworkPhase(
        preflight=checked,
        after=after,
        cases=ran,
        rows=rows,
        started_at=started,
        finished_at=finished,
        cases_elapsed_s=cases_elapsed,
        refusal_outputs=refusal_outputs,
        sessions=1 if session is None else session.sessions,
        repeat=options.repeat,
        repeated=repeated,
    )

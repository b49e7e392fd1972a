"""One whole run, end to end: network phase -> tables -> score -> artifact -> gate -> store.

``prepare`` has validated every input; :func:`execute` runs the network
phase (:mod:`taguru_eval.run.runner`), then the one-way pipeline of
:mod:`taguru_eval.pipeline.finish`, which prints the console summary and keeps
the run in the store."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from taguru_eval._base.signals import stoppable
from taguru_eval.artifact.layout import LaneBlocks
from taguru_eval.inputs.prepare import PreparedRun
from taguru_eval.resume import Session, open_session
from taguru_eval.run import loop
from taguru_eval.run.console import Console, Progress
from taguru_eval.run.runner import NetworkPhase, network_phase

if TYPE_CHECKING:
    import httpx

    from taguru_eval.pipeline.finish import RunResult


async def execute_async(
    prepared: PreparedRun,
    *,
    console: Console | None = None,
    transport: httpx.AsyncBaseTransport | None = None,
    progress: Progress | None = None,
) -> RunResult:
    """One whole run; raises a project error for exit 1/2 outcomes (nothing written)."""
    console = console or Console()
    lane_blocks = LaneBlocks()
    sessions: list[Session] = []
    try:
        phase, session = await stoppable(
            _network(prepared, console, transport, progress, lane_blocks, sessions)
        )
        return _finished(prepared, phase, console, lane_blocks, session)
    finally:
        _release(sessions)
        lane_blocks.close()


def execute(
    prepared: PreparedRun,
    *,
    console: Console | None = None,
    transport: httpx.AsyncBaseTransport | None = None,
    progress: Progress | None = None,
) -> RunResult:
    """:func:`execute_async` with its own event loop for the network phase only.

    The finishing stages run after the loop is closed: inside it a stop signal
    cancels the network phase (:func:`~taguru_eval._base.signals.stoppable`), and
    a synchronous stage would only see that cancellation once it had written and
    stored the whole run. Out of it, the signal is raised at the finishing
    stages' next check (between stages, per chunk written): a file not yet in
    place is removed, the store's staging goes, and the run exits 130 / 143.
    """
    console = console or Console()
    lane_blocks = LaneBlocks()
    sessions: list[Session] = []
    try:
        with loop.runner() as runner:
            runner.get_loop().set_exception_handler(_interrupts_reported_once)
            phase, session = runner.run(
                stoppable(_network(prepared, console, transport, progress, lane_blocks, sessions))
            )
        return _finished(prepared, phase, console, lane_blocks, session)
    finally:
        _release(sessions)
        lane_blocks.close()


async def _network(
    prepared: PreparedRun,
    console: Console,
    transport: httpx.AsyncBaseTransport | None,
    progress: Progress | None,
    lane_blocks: LaneBlocks,
    sessions: list[Session],
) -> tuple[NetworkPhase, Session | None]:
    """The network phase, every finished case's lane values kept in ``lane_blocks``
    (and in the run's checkpoint, with a store: its session is put in ``sessions``
    the moment it holds the checkpoint, so its lock is let go however the run ends)."""
    # --resume is checked (exit 2) before anything is sent.
    session = open_session(prepared, prepared.options.store_path)
    if session is not None:
        sessions.append(session)
    phase = await network_phase(
        prepared,
        console=console,
        transport=transport,
        progress=progress,
        on_finished=lane_blocks.add if session is None else session.after(lane_blocks.add),
        session=session,
    )
    return phase, session


def _finished(
    prepared: PreparedRun,
    phase: NetworkPhase,
    console: Console,
    lane_blocks: LaneBlocks,
    session: Session | None,
) -> RunResult:
    # Loaded once the network phase is over: what only the finished run needs
    # (scoring, the gate, the artifact writer, the store) is not paid for
    # before the first request.
    from taguru_eval.pipeline.finish import finish_run

    result = finish_run(
        prepared, phase, console, lane_blocks, None if session is None else session.retire
    )
    if session is not None:
        session.finish()  # the artifact is written: nothing is left to resume
    return result


def _release(sessions: list[Session]) -> None:
    """The checkpoint's lock goes with the run, however it ended (a library
    caller's process lives on; the command line's would drop it at exit)."""
    for session in sessions:
        session.release()


def _interrupts_reported_once(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
    """The loop's handler of unretrieved task errors. An interrupt (Ctrl-C, or SIGTERM
    raised as one) is set on the task it stopped and re-raised: the caller reports it
    once, so asyncio's "Task exception was never retrieved" and its traceback, printed
    when that task is collected, would only repeat it."""
    if isinstance(context.get("exception"), KeyboardInterrupt):
        return
    loop.default_exception_handler(context)

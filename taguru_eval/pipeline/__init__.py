"""One whole run, end to end: network phase -> tables -> score -> artifact -> gate -> store.

``prepare`` has validated every input; :func:`execute` runs the network
phase (:mod:`taguru_eval.run.runner`), then the one-way pipeline of
:mod:`taguru_eval.pipeline.finish`, which prints the console summary and keeps
the run in the store."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

import httpx

from taguru_eval.artifact.layout import LaneBlocks
from taguru_eval.inputs.prepare import PreparedRun
from taguru_eval.resume import open_session
from taguru_eval.run.console import Console, Progress
from taguru_eval.run.runner import network_phase

if TYPE_CHECKING:
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
    # --resume is checked (exit 2) before anything is sent.
    session = open_session(prepared, prepared.options.store_path)
    try:
        phase = await network_phase(
            prepared,
            console=console,
            transport=transport,
            progress=progress,
            on_finished=lane_blocks.add if session is None else session.after(lane_blocks.add),
            session=session,
        )
        # Loaded once the network phase is over: what only the finished run needs
        # (scoring, the gate, the artifact writer, the store) is not paid for
        # before the first request.
        from taguru_eval.pipeline.finish import finish_run

        result = finish_run(prepared, phase, console, lane_blocks)
    finally:
        lane_blocks.close()
    if session is not None:
        session.finish()  # the artifact is written: nothing is left to resume
    return result


def execute(
    prepared: PreparedRun,
    *,
    console: Console | None = None,
    transport: httpx.AsyncBaseTransport | None = None,
    progress: Progress | None = None,
) -> RunResult:
    """Synchronous :func:`execute_async` (its own event loop)."""
    with asyncio.Runner() as runner:
        runner.get_loop().set_exception_handler(_interrupts_reported_once)
        return runner.run(
            execute_async(prepared, console=console, transport=transport, progress=progress)
        )


def _interrupts_reported_once(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
    """The loop's handler of unretrieved task errors. An interrupt (Ctrl-C, or SIGTERM
    raised as one) is set on the task it stopped and re-raised: the caller reports it
    once, so asyncio's "Task exception was never retrieved" and its traceback, printed
    when that task is collected, would only repeat it."""
    if isinstance(context.get("exception"), KeyboardInterrupt):
        return
    loop.default_exception_handler(context)

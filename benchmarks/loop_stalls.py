"""Where the event loop stops: a lag probe beside the network phase at ``--concurrency 64``.

Runs the real network phase of ``--cases`` baseline cases against the 50 ms
stub (as ``throughput.py``), each run in this one process (the first is the
cold run every ``taguru-eval run`` is), with a probe on the event loop: a
callback due every 2 ms that records how late it ran. While the loop runs
one long piece of work (building tables, a collection, a first-time import)
every answer that arrives waits with the probe, so a stall of d ms costs the
call rate about d ms of every slot. Prints per run the call rate against
the ideal 1,280 calls/s, the probe's lateness percentiles, and every stall
of at least ``--stall-ms`` with when it came (seconds since the cases began;
negative: before them, during preflight).

    .venv/bin/python benchmarks/loop_stalls.py [--cases 6400] [--runs 2] [--stall-ms 20]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import io
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from stub import Stub
from throughput import CONTEXT, DELAY_S, _write_eval, run_hooks, stub_routes

PROBE_S = 0.002


def _measure(eval_path: Path, url: str, concurrency: int, stall_s: float) -> None:
    from taguru_eval.inputs.prepare import prepare_run
    from taguru_eval.options import RunOptions
    from taguru_eval.run import runner
    from taguru_eval.run.console import Console

    lateness: list[float] = []
    stalls: list[tuple[float, float]] = []  # (loop time, seconds late)
    cases_began = [0.0]
    run_cases = runner.run_cases

    async def timed_cases(*args: Any, **kwargs: Any) -> Any:
        cases_began[0] = asyncio.get_running_loop().time()
        return await run_cases(*args, **kwargs)

    def start_probe(loop: asyncio.AbstractEventLoop) -> None:
        due = loop.time() + PROBE_S

        def tick() -> None:
            nonlocal due
            now = loop.time()
            late = now - due
            lateness.append(late)
            if late >= stall_s:
                stalls.append((now, late))
            due = now + PROBE_S
            loop.call_later(PROBE_S, tick)

        loop.call_later(PROBE_S, tick)

    options = RunOptions(
        eval_path=str(eval_path), context=CONTEXT, url=url, concurrency=concurrency, no_store=True
    )
    prepared = prepare_run(options, {})
    console = Console(stdout=io.StringIO(), stderr=io.StringIO())

    async def phase() -> Any:
        start_probe(asyncio.get_running_loop())
        return await runner.network_phase(prepared, console=console, **run_hooks())

    runner.run_cases = timed_cases  # type: ignore[assignment]
    try:
        gc.collect()
        result = asyncio.run(phase())
    finally:
        runner.run_cases = run_cases  # type: ignore[assignment]
    cases = len(result.outputs) if hasattr(result, "outputs") else result.cases
    rate = cases / result.cases_elapsed_s
    ordered = sorted(lateness)

    def at(share: float) -> float:
        return ordered[round(share * (len(ordered) - 1))] * 1000

    ideal = concurrency / DELAY_S
    print(
        f"  {rate:6,.0f} calls/s = {rate / ideal:5.1%} of ideal; probe late p50 {at(0.5):.2f} ms, "
        f"p99 {at(0.99):.1f} ms, max {at(1.0):.0f} ms; stalls >= {stall_s * 1000:.0f} ms: "
        + (
            ", ".join(
                f"{late * 1000:.0f} ms at {when - cases_began[0]:+.2f} s" for when, late in stalls
            )
            or "none"
        )
    )
    sys.stdout.flush()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=6400)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--stall-ms", type=float, default=20.0)
    args = parser.parse_args(argv)
    with Stub(DELAY_S, stub_routes()) as stub, tempfile.TemporaryDirectory() as tmp:
        eval_path = _write_eval(Path(tmp), args.cases)
        print(
            f"{args.cases} baseline cases at --concurrency {args.concurrency} against the "
            f"{DELAY_S * 1000:.0f} ms stub, {args.runs} runs in one process (the first cold):"
        )
        for _ in range(args.runs):
            _measure(eval_path, stub.url, args.concurrency, args.stall_ms / 1000)
    return 0


if __name__ == "__main__":
    started = time.monotonic()
    status = main()
    print(f"(benchmark took {time.monotonic() - started:.0f} s)")
    sys.exit(status)

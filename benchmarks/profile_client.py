"""Where the client's CPU goes at ``--concurrency 64`` against the 50 ms stub.

Runs the real network phase of ``--cases`` baseline cases (as
``throughput.py``) under cProfile and sums the time spent *in* each function
(``tottime``) by where it lives: the event loop (asyncio, selectors, the
kernel's socket calls), the transport (aiohttp, yarl,
multidict), httpx's request/response models, JSON, and taguru_eval itself
(client, lanes, runner). Prints the totals per group in µs per case, then the top functions.

    .venv/bin/python benchmarks/profile_client.py [--cases 2000] [--concurrency 64]
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

from stub import Stub
from throughput import DELAY_S, _write_eval, run_hooks, stub_routes

GROUPS = (
    ("taguru_eval/run/http", "client (taguru_eval.run.http)"),
    ("taguru_eval/run/lanes", "lanes (taguru_eval.run.lanes)"),
    ("taguru_eval/_base", "jsonstrict, redaction (taguru_eval._base)"),
    ("taguru_eval", "rest of taguru_eval"),
    ("aiohttp", "transport (aiohttp, yarl, multidict)"),
    ("yarl", "transport (aiohttp, yarl, multidict)"),
    ("multidict", "transport (aiohttp, yarl, multidict)"),
    ("uvloop", "event loop (uvloop or asyncio, selectors, sockets)"),
    ("httpx", "httpx request/response models"),
    ("json", "json (stdlib)"),
    ("asyncio", "event loop (asyncio, selectors, sockets)"),
    ("selectors", "event loop (asyncio, selectors, sockets)"),
    ("socket", "event loop (asyncio, selectors, sockets)"),
    ("epoll", "event loop (asyncio, selectors, sockets)"),
)


def group_of(filename: str, name: str) -> str:
    where = f"{filename} {name}"
    for needle, group in GROUPS:
        if needle in where:
            return group
    return "other (builtins, contextvars, ...)"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=64)
    args = parser.parse_args(argv)
    from taguru_eval.inputs.prepare import prepare_run
    from taguru_eval.options import RunOptions
    from taguru_eval.run import loop
    from taguru_eval.run.console import Console
    from taguru_eval.run.runner import network_phase

    with Stub(DELAY_S, stub_routes()) as stub, tempfile.TemporaryDirectory() as tmp:
        eval_path = _write_eval(Path(tmp), args.cases)
        options = RunOptions(
            eval_path=str(eval_path),
            context="bench",
            url=stub.url,
            concurrency=args.concurrency,
            no_store=True,
        )
        prepared = prepare_run(options, {})
        console = Console(stdout=io.StringIO(), stderr=io.StringIO())
        loop.run(network_phase(prepared, console=console, **run_hooks()))  # warm-up
        profile = cProfile.Profile()
        profile.enable()
        loop.run(network_phase(prepared, console=console, **run_hooks()))
        profile.disable()
    stats = pstats.Stats(profile)
    totals: dict[str, float] = defaultdict(float)
    rows = []
    for (filename, _line, name), (_cc, _nc, tottime, _ct, _callers) in stats.stats.items():  # type: ignore[attr-defined]
        totals[group_of(filename, name)] += tottime
        rows.append((tottime, f"{Path(filename).name}:{name}"))
    total = sum(totals.values())
    print(f"{args.cases} cases at --concurrency {args.concurrency}, profiled: {total:.2f} s")
    print("time spent in functions, by where they live (µs per case; share):")
    for group, seconds in sorted(totals.items(), key=lambda item: -item[1]):
        print(f"  {seconds / args.cases * 1e6:7.0f} µs  {seconds / total:6.1%}  {group}")
    print("top functions (tottime, µs per case):")
    for seconds, name in sorted(rows, reverse=True)[:20]:
        print(f"  {seconds / args.cases * 1e6:7.0f} µs  {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

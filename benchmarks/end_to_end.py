"""End to end: a 100,000-case run against a stub answering after 1 ms, store on.

1. Records the answers of the reference server to one demo run (the 16 cases
   of ``data/sake/eval.jsonl``, every route a baseline run calls: health,
   context entry, embeddings, the sources walk, search, resolve and
   resolve_label, query, citations), through a recording transport.
2. Starts the lean stub (``stub.py``) in a child process, answering each of
   those exact requests with the recorded answer after ``--delay-ms``.
3. Runs ``taguru-eval run`` itself (prepare + execute: load, preflight, the
   cases at ``--concurrency``, tables, score, artifact, store) over
   ``--cases`` demo-shaped cases (``synthetic.write_eval``: the demo cases
   under fresh ids, so every request is one the stub has an answer for) in a
   fresh child process, ``--repeats`` times, and reports per run:

   * the network phase on the server's clock (first to last request it got);
   * the client's wall time, prepare through the store, and its ratio to the
     network phase (target: at most 1.25);
   * the breakdown: load (prepare_run: eval.jsonl, thresholds), preflight
     (probe + §3.1 checks), network (the cases, client clock; of which the
     finished cases turned into nested Arrow chunks as they came), tables
     (the flat tables, built at the end), score, artifact (build + write), store
     (the part after the artifact: the tables are written on a thread while the
     artifact is built, timed apart), and the rest (summary, gate, console);
   * the client's peak resident set (VmHWM) and CPU time.

The child times the stages by wrapping the pipeline's own functions; nothing
in the package is changed for it. ``--tree DIR`` runs another source tree's
client instead (e.g. ``git archive <commit> taguru_eval``), to compare.

    .venv/bin/python benchmarks/end_to_end.py [--cases 100000] [--concurrency 64]
        [--delay-ms 1] [--repeats 1] [--tree DIR]
"""

from __future__ import annotations

import argparse
import gc
import io
import json
import os
import pickle
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from child import print_result, run_child, status_kib

ROOT = Path(__file__).resolve().parents[1]
RATIO_TARGET = 1.25
STAGES = ("load", "preflight", "network", "tables", "score", "artifact", "store")


def record_demo(directory: Path) -> Path:
    """The reference server's answers to one demo run, pickled into ``directory``."""
    sys.path.insert(0, str(ROOT))
    import httpx

    from taguru_eval.demo.data import DEMO_CONTEXT, demo_data_dir
    from taguru_eval.inputs.prepare import prepare_run
    from taguru_eval.options import RunOptions
    from taguru_eval.pipeline import execute
    from taguru_eval.run.console import Console
    from taguru_refserver.serve import running_server

    answers: dict[tuple[str, str, bytes], tuple[int, bytes]] = {}

    class Recording(httpx.AsyncBaseTransport):
        def __init__(self, inner: httpx.AsyncBaseTransport) -> None:
            self.inner = inner

        async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
            response = await self.inner.handle_async_request(request)
            body = await response.aread()
            target = unquote(request.url.raw_path.decode("ascii"))
            answers[(request.method, target, request.content)] = (response.status_code, body)
            return httpx.Response(response.status_code, content=body, request=request)

        async def aclose(self) -> None:
            await self.inner.aclose()

    with running_server(demo_data_dir()) as url:
        options = RunOptions(
            eval_path=str(demo_data_dir() / DEMO_CONTEXT / "eval.jsonl"),
            context=DEMO_CONTEXT,
            url=url,
            out=str(directory / "demo-evaluation.json"),
            no_store=True,
        )
        console = Console(stdout=io.StringIO(), stderr=io.StringIO())
        prepared = prepare_run(options, {}, stderr=console.err)
        execute(prepared, console=console, transport=Recording(httpx.AsyncHTTPTransport()))
    path = directory / "answers.pickle"
    path.write_bytes(pickle.dumps(answers))
    return path


ANSWERS_ENV = "TAGURU_EVAL_BENCH_ANSWERS"
"""Set by the parent for the child of an ``--answers`` run: the answers file it passes."""


def write_answers(eval_path: Path, path: Path) -> Path:
    """Two answers per case: its first declared quote (text the corpus holds; else its
    query's first word) and one no paragraph holds, so every window is searched whole."""
    lines = [json.dumps({"taguru_eval_answers": 1, "name": "benchmark"})]
    with eval_path.open(encoding="utf-8") as cases:
        next(cases)
        for line in cases:
            case = json.loads(line)
            quotes = [c["quote"] for c in case.get("expected_citations", []) if c.get("quote")]
            first = quotes[0] if quotes else case["query"].split()[0]
            entry = {"case_id": case["case_id"], "answers": [first, "an answer held nowhere"]}
            lines.append(json.dumps(entry, ensure_ascii=False))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def child(eval_path: Path, url: str, concurrency: int, work: Path, tree: Path) -> None:
    sys.path.insert(0, str(tree))
    from taguru_eval import pipeline
    from taguru_eval.demo.data import DEMO_CONTEXT
    from taguru_eval.inputs import prepare
    from taguru_eval.options import RunOptions
    from taguru_eval.run import runner
    from taguru_eval.run.console import Console

    seconds: dict[str, float] = dict.fromkeys((*STAGES, "batches", "staged"), 0.0)

    def timed(stage: str, function: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                seconds[stage] += time.perf_counter() - started

        return wrapper

    def timed_async(stage: str, function: Callable[..., Any]) -> Callable[..., Any]:
        async def wrapper(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return await function(*args, **kwargs)
            finally:
                seconds[stage] += time.perf_counter() - started

        return wrapper

    runner.probe_version = timed_async("preflight", runner.probe_version)
    runner.preflight = timed_async("preflight", runner.preflight)
    runner.run_cases = timed_async("network", runner.run_cases)
    # The stages after the network phase: pipeline/finish.py, or (a tree from before)
    # the pipeline module itself.
    try:
        from taguru_eval.pipeline import finish as stages
    except ImportError:
        stages = pipeline
    if hasattr(stages, "build_tables"):  # a tree from before the tables were built as cases ran
        stages.build_tables = timed("tables", stages.build_tables)
    else:
        from taguru_eval.tables import flatten

        flatten.TableRows.finish = timed("tables", flatten.TableRows.finish)  # type: ignore[method-assign]
        # Arrow conversion as cases finish (a tree from before: whole batches of table rows).
        during = "_convert" if hasattr(flatten.TableRows, "_convert") else "_flush"
        setattr(flatten.TableRows, during, timed("batches", getattr(flatten.TableRows, during)))
    stages.score_run = timed("score", stages.score_run)
    if hasattr(stages, "write_artifact"):  # streamed: the case blocks are built as written
        stages.write_artifact = timed("artifact", stages.write_artifact)
    else:  # a tree from before: built in memory, then written
        stages.build_artifact = timed("artifact", stages.build_artifact)
        stages.write_json_atomic = timed("artifact", stages.write_json_atomic)
    if hasattr(stages, "StagedRun"):
        # The tables are staged on a thread beside the artifact ("staged", not on the
        # critical path); "store" is what is left once the artifact is written.
        from taguru_eval import store

        staged_tables = store.StagedRun._write_tables
        store.StagedRun._write_tables = timed("staged", staged_tables)  # type: ignore[method-assign]
        store.StagedRun.finish = timed("store", store.StagedRun.finish)  # type: ignore[method-assign]
    else:  # a tree from before: the store written after the artifact
        stages.write_run = timed("store", stages.write_run)

    collecting = {"started": 0.0, "seconds": 0.0, "full": 0}

    def collection(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            collecting["started"] = time.perf_counter()
        else:
            collecting["seconds"] += time.perf_counter() - collecting["started"]
            collecting["full"] += info["generation"] == 2

    gc.callbacks.append(collection)
    answers = os.environ.get(ANSWERS_ENV)
    options = RunOptions(
        eval_path=str(eval_path),
        context=DEMO_CONTEXT,
        url=url,
        out=str(work / "evaluation.json"),
        concurrency=concurrency,
        store_dir=str(work / "runs"),
        quiet=True,
        **({"answers": answers} if answers else {}),
    )
    console = Console(stdout=io.StringIO(), stderr=io.StringIO())
    cpu = time.process_time()
    started = time.perf_counter()
    prepared = timed("load", prepare.prepare_run)(options, {}, stderr=console.err)
    result = pipeline.execute(prepared, console=console)
    wall = time.perf_counter() - started
    cpu = time.process_time() - cpu
    print_result(
        {
            "wall": wall,
            "cpu": cpu,
            "seconds": seconds,
            "peak_kib": status_kib("VmHWM"),
            "gc_seconds": collecting["seconds"],
            "gc_full": collecting["full"],
            "cases": getattr(result, "case_count", None) or len(result.lane_outputs),
            "calls": result.tables.calls.height,
            "exit_code": result.exit_code,
            "artifact_bytes": Path(options.out).stat().st_size,
        }
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=100_000)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--delay-ms", type=float, default=1.0)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--tree", type=Path, default=ROOT)
    parser.add_argument(
        "--answers",
        action="store_true",
        help="each repeat runs twice, without and with --answers (two per case), A B A B",
    )
    parser.add_argument(
        "--child", nargs=4, metavar=("EVAL", "URL", "C", "WORK"), help=argparse.SUPPRESS
    )
    args = parser.parse_args(argv)
    if args.child:
        eval_path, url, concurrency, work = args.child
        child(Path(eval_path), url, int(concurrency), Path(work), args.tree)
        return 0
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from stub import Stub
    from synthetic import write_eval

    met = True
    with tempfile.TemporaryDirectory(prefix="end-to-end-") as tmp:
        work = Path(tmp)
        answers = pickle.loads(record_demo(work).read_bytes())
        eval_path = write_eval(work / "eval.jsonl", args.cases)
        loads = ", ".join(f"{load:.1f}" for load in os.getloadavg())
        print(
            f"{args.cases:,} demo-shaped cases, stub answering {len(answers)} recorded requests "
            f"after {args.delay_ms:g} ms, --concurrency {args.concurrency}, store on "
            f"(load average {loads})"
        )
        ratios = []
        walls: dict[str, list[float]] = {"without": [], "with --answers": []}
        answers_file = write_answers(eval_path, work / "answers.jsonl") if args.answers else None
        variants = list(walls) if args.answers else ["without"]
        for repeat, variant in [(r, v) for r in range(args.repeats) for v in variants]:
            if args.answers:
                print(f"  [{variant}]")
            os.environ.pop(ANSWERS_ENV, None)
            if variant != "without" and answers_file is not None:
                os.environ[ANSWERS_ENV] = str(answers_file)
            with Stub(args.delay_ms / 1000, {}, exact=answers) as stub:
                run_dir = work / f"run{repeat}-{variants.index(variant)}"
                run_dir.mkdir()
                arguments = [str(eval_path), stub.url, str(args.concurrency), str(run_dir)]
                arguments += ["--tree", str(args.tree)]
                result = run_child(__file__, arguments)
                stats = stub.stats()
            if isinstance(result, str):
                print(f"  run {repeat + 1}: {result}")
                met = False
                continue
            network = stats["last"] - stats["first"]
            ratio = result["wall"] / network
            ratios.append(ratio)
            walls[variant].append(result["wall"])
            stages = result["seconds"]
            batches = stages.pop("batches")
            staged = stages.pop("staged", 0.0)
            rest = result["wall"] - sum(stages.values())
            not_found = stats["by_route"]
            print(
                f"  run {repeat + 1}: {result['cases']:,} cases, {result['calls']:,} calls "
                f"({stats['requests']:,} requests at the stub; exit {result['exit_code']})\n"
                f"    network phase (server clock) {network:8.2f} s\n"
                f"    client wall                  {result['wall']:8.2f} s = {ratio:.3f}x the "
                f"network phase (target <= {RATIO_TARGET}); client CPU {result['cpu']:.1f} s\n"
                "    breakdown: "
                + ", ".join(f"{stage} {stages[stage]:.2f} s" for stage in STAGES)
                + f", rest {rest:.2f} s (of the network phase, {batches:.2f} s turned finished "
                f"cases into Arrow chunks; beside the artifact, {staged:.2f} s wrote the store's "
                f"tables); the cyclic collector ran {result['gc_seconds']:.2f} s "
                "in all "
                f"({result['gc_full']} full collections)\n"
                f"    peak RSS {result['peak_kib'] / 1024:,.0f} MiB; evaluation.json "
                f"{result['artifact_bytes'] / 1e6:,.0f} MB; requests by route {not_found}"
            )
            sys.stdout.flush()
        if args.answers and all(walls.values()):
            without, answered = (statistics.median(values) for values in walls.values())
            print(
                f"median client wall: {without:.2f} s without, {answered:.2f} s with --answers "
                f"({answered / without:.3f}x)"
            )
        if ratios:
            ratio = statistics.median(ratios)
            ok = ratio <= RATIO_TARGET
            met = met and ok
            print(
                f"median ratio {ratio:.3f} — target <= {RATIO_TARGET}: {'met' if ok else 'MISSED'}"
            )
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())

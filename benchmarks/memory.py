"""Peak memory of a whole run at scale: 50,000 and 100,000 cases, 10 hits of 300 bytes each.

Each size runs ``python -m taguru_eval run`` in a child process (store and
artifact written, as a user runs it) against the lean stub (``stub.py``),
whose every search answers 10 hits of about 300 bytes of text; the child's
peak resident set comes from ``wait4``. Targets (issue "Light at scale"): at
most 1.0 GiB at 100,000 cases, and at most 300 MiB more at 100,000 than at
50,000. ``--tree DIR`` runs the same sizes, interleaved, with another checkout
of the package first on ``PYTHONPATH`` (say ``main`` before the change), so
both figures come from one run of the script. ``--send N`` passes ``run --repeat
N`` (every case sent N times; the stub answers alike, so every case is stable).

    python benchmarks/memory.py [--sizes 50000,100000] [--repeats 1] [--tree DIR] [--send N]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from stub import Stub
from throughput import CONTEXT, stub_routes

MIB = 1024 * 1024
PEAK_TARGET_MIB = 1024
GROWTH_TARGET_MIB = 300
HITS = 10
TEXT_BYTES = 300


def _search_body() -> bytes:
    hits = [
        {
            "source": f"doc-{rank}.md",
            "paragraph": rank,
            "score": 1.0 / (rank + 1),
            "text": (f"paragraph {rank} " * 40)[:TEXT_BYTES],
            "lanes": {"bm25": {"rank": rank + 1, "score": 1.0 / (rank + 1)}},
        }
        for rank in range(HITS)
    ]
    plan = {"contexts": [{"context": CONTEXT, "lanes": {"bm25": {"ran": True}}}]}
    result = {"plan": plan, "hits": hits}
    return json.dumps({"result": result, "status": "ok", "time": 0.0}).encode()


def _write_eval(path: Path, cases: int) -> Path:
    with path.open("w", encoding="utf-8") as handle:
        handle.write(json.dumps({"taguru_eval": 1, "name": "memory"}) + "\n")
        for index in range(cases):
            case = {
                "case_id": f"c{index:06d}",
                "query": f"query {index}",
                "expected_sources": [{"source": f"doc-{index % 12}.md", "relevance": 1}],
            }
            handle.write(json.dumps(case) + "\n")
    return path


def _peak_mib(eval_path: Path, url: str, work: Path, tree: str | None, send: int = 1) -> float:
    env = dict(os.environ)
    if tree is not None:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [tree, env.get("PYTHONPATH")]))
    argv = [
        sys.executable,
        "-m",
        "taguru_eval",
        "run",
        "--eval",
        str(eval_path),
        "--context",
        CONTEXT,
        "--url",
        url,
        "--out",
        str(work / "evaluation.json"),
        "--store",
        str(work / "runs"),
        "--concurrency",
        "64",
        "--quiet",
        *(["--repeat", str(send)] if send > 1 else []),
    ]
    child = subprocess.Popen(
        argv, env=env, cwd=work, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    assert child.stderr is not None
    errors = child.stderr.read()
    _, status, usage = os.wait4(child.pid, 0)
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode != 0:
        raise SystemExit(f"run failed ({child.returncode}): {errors.decode()[-2000:]}")
    return usage.ru_maxrss / 1024  # KiB on Linux


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="50000,100000")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--tree", help="another checkout's root, measured beside this one")
    parser.add_argument("--send", type=int, default=1, help="run --repeat N (default 1)")
    args = parser.parse_args(argv)
    sizes = [int(size) for size in args.sizes.split(",")]
    trees: dict[str, str | None] = {"this tree": None}
    if args.tree:
        trees[f"--tree {args.tree}"] = args.tree
    sources = [f"doc-{rank}.md" for rank in range(12)]
    listing = {"result": {"total": len(sources), "sources": sources, "entries": []}, "status": "ok"}
    routes = {
        **stub_routes(),
        "sources_first": json.dumps({**listing, "time": 0.0}).encode(),
        "search": _search_body(),
        f"search:{CONTEXT}": _search_body(),
    }
    peaks: dict[tuple[str, int], list[float]] = {}
    with tempfile.TemporaryDirectory() as scratch, Stub(0.0, routes) as stub:
        root = Path(scratch)
        for size in sizes:
            eval_path = _write_eval(root / f"eval-{size}.jsonl", size)
            for repeat in range(args.repeats):
                for label, tree in trees.items():  # interleaved: A B A B
                    work = root / f"{size}-{repeat}-{len(peaks)}"
                    work.mkdir()
                    peak = _peak_mib(eval_path, stub.url, work, tree, args.send)
                    peaks.setdefault((label, size), []).append(peak)
                    print(f"  {label}: {size:,} cases: peak {peak:,.0f} MiB", flush=True)
    print(f"peak resident memory, {HITS} hits x {TEXT_BYTES} B per search (median):")
    for label in trees:
        medians = {size: statistics.median(peaks[(label, size)]) for size in sizes}
        figures = ", ".join(f"{size:,}: {medians[size]:,.0f} MiB" for size in sizes)
        print(f"  {label}: {figures}")
        largest, smallest = max(sizes), min(sizes)
        if label == "this tree":
            verdict = "met" if medians[largest] <= PEAK_TARGET_MIB else "MISSED"
            print(f"    peak at {largest:,}: target <= {PEAK_TARGET_MIB:,} MiB: {verdict}")
            if largest != smallest:
                growth = medians[largest] - medians[smallest]
                verdict = "met" if growth <= GROWTH_TARGET_MIB else "MISSED"
                print(
                    f"    {smallest:,} -> {largest:,}: +{growth:,.0f} MiB "
                    f"(target <= {GROWTH_TARGET_MIB} MiB): {verdict}"
                )
    if args.tree:
        for size in sizes:
            ratio = statistics.median(peaks[("this tree", size)]) / statistics.median(
                peaks[(f"--tree {args.tree}", size)]
            )
            print(f"  {size:,} cases: this tree / --tree = {ratio:.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

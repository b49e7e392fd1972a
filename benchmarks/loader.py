"""Benchmark loading eval.jsonl: the loader against its strict reader, side by side.

Writes demo-shaped eval.jsonl files (``synthetic.write_eval``: the 16 cases
of ``data/sake/eval.jsonl`` repeated under fresh ids, UTF-8) of each size in
``--sizes`` and loads each one, in a fresh child process per path:

* ``loader``: ``load_eval(path)``, the public loader; the child checks that its
  one decoding answered for the file (no strict fallback);
* ``strict``: ``load_eval_strict(text)`` on the file's text, the reader that
  words every error;
* ``before`` (only with ``--before DIR``): ``load_eval(path)`` from another
  source tree, e.g. the commit a change started from
  (``git archive <commit> taguru_eval | tar -x -C DIR``).

Each child warms up on the demo file, then times ``--repeats`` loads (median
wall and CPU seconds); its peak resident set (VmHWM) is reset just before the
first timed load, so "peak" is the high-water mark while loading and
"loading +" is that peak minus the resident set just before. The children
report the number of cases and expected rows and a hash of the expected
table; all paths must agree.

Target: the loader at least 5x the strict reader at 100,000 cases.

    .venv/bin/python benchmarks/loader.py [--sizes 100000] [--repeats 3]
        [--rounds 1] [--before DIR] [--keep DIR] [--drop KEY,KEY]

With ``--rounds N`` each path runs in N children, the paths taking turns
(loader, strict, before, loader, …), and every median is over all N × repeats
loads: on a shared machine a slow spell then falls on every path alike.
"""

from __future__ import annotations

import argparse
import gc
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from child import print_result, reset_peak, run_child, status_kib

ROOT = Path(__file__).resolve().parents[1]
PATHS = ("loader", "strict", "before")
RATIO_TARGET = 5.0


def child(path_name: str, eval_path: Path, repeats: int, tree: Path) -> None:
    sys.path.insert(0, str(tree))
    from taguru_eval.inputs import dataset

    def load() -> Any:
        if path_name == "strict":
            return dataset.load_eval_strict(eval_path.read_bytes().decode("utf-8"), "eval.jsonl")
        return dataset.load_eval(eval_path, "eval.jsonl")

    dataset.load_eval(ROOT / "data" / "sake" / "eval.jsonl")  # warm up: imports, first Polars calls
    gc.collect()
    resident_before = status_kib("VmRSS")
    peak_reset = reset_peak()
    seconds: list[float] = []
    cpu_seconds: list[float] = []
    loaded: Any = None
    for _ in range(repeats):
        loaded = None
        gc.collect()
        started, cpu_started = time.perf_counter(), time.process_time()
        loaded = load()
        seconds.append(time.perf_counter() - started)
        cpu_seconds.append(time.process_time() - cpu_started)
    expected = loaded.expected
    values = {
        "seconds": seconds,
        "cpu_seconds": cpu_seconds,
        "resident_before_kib": resident_before,
        "peak_kib": status_kib("VmHWM"),
        "peak_reset": peak_reset,
        "cases": len(loaded.cases),
        "expected_rows": expected.height,
        "expected_hash": int(expected.hash_rows(seed=15).sum()),
    }
    if path_name == "loader":
        raw = eval_path.read_bytes()
        values["decoded"] = dataset.load_eval_fast(raw, "eval.jsonl") is not None
    print_result(values)


def _run_child(path_name: str, eval_path: Path, repeats: int, tree: Path) -> dict[str, Any] | str:
    arguments = [path_name, str(eval_path), "--repeats", str(repeats), "--tree", str(tree)]
    return run_child(__file__, arguments)


def _mib(kib: int) -> str:
    return f"{kib / 1024:,.0f} MiB"


def _measure(size: int, eval_path: Path, repeats: int, rounds: int, before: Path | None) -> bool:
    megabytes = eval_path.stat().st_size / 1e6
    loads = ", ".join(f"{load:.1f}" for load in os.getloadavg())
    print(
        f"\n{size:,} cases ({megabytes:,.1f} MB), {rounds} round(s) of {repeats} timed load(s) "
        f"per path, one child per path and round (load average {loads}):"
    )
    results: dict[str, dict[str, Any]] = {}
    failed: set[str] = set()
    # Paths alternate round by round, so a slow spell of the machine falls on all of them.
    for _round in range(rounds):
        for path_name in PATHS:
            if (path_name == "before" and before is None) or path_name in failed:
                continue
            tree = before if path_name == "before" and before is not None else ROOT
            result = _run_child(path_name, eval_path, repeats, tree)
            if isinstance(result, str):
                print(f"  {path_name:<7} {result}")
                failed.add(path_name)
                results.pop(path_name, None)
                continue
            pooled = results.setdefault(path_name, result)
            if pooled is not result:
                pooled["seconds"] += result["seconds"]
                pooled["cpu_seconds"] += result["cpu_seconds"]
                pooled["peak_kib"] = max(pooled["peak_kib"], result["peak_kib"])
    for path_name, result in results.items():
        median = statistics.median(result["seconds"])
        cpu = statistics.median(result["cpu_seconds"])
        grown = result["peak_kib"] - result["resident_before_kib"]
        print(
            f"  {path_name:<7} median {median:7.3f} s (CPU {cpu:6.3f} s; runs "
            f"{', '.join(f'{s:.3f}' for s in result['seconds'])}); "
            f"{size / median:>10,.0f} cases/s, {megabytes / median:6.1f} MB/s; "
            f"peak RSS {_mib(result['peak_kib'])} (loading + {_mib(grown)})"
            + ("" if result["peak_reset"] else " [peak not reset]")
        )
    loader = results.get("loader")
    if loader is None or "strict" not in results:
        return False
    met = True
    if not loader.get("decoded"):
        print("  the loader's decoding did not answer for this file (the strict reader did)")
        met = False
    digests = {
        name: (r["cases"], r["expected_rows"], r["expected_hash"]) for name, r in results.items()
    }
    if len(set(digests.values())) != 1:
        print(f"  the paths disagree: {digests}")
        met = False
    else:
        cases, rows, _digest = digests["loader"]
        print(f"  all paths loaded {cases:,} cases and the same {rows:,}-row expected table")
    loader_s = statistics.median(loader["seconds"])
    loader_cpu = statistics.median(loader["cpu_seconds"])
    for name in ("strict", "before"):
        if name not in results:
            continue
        ratio = statistics.median(results[name]["seconds"]) / loader_s
        cpu_ratio = statistics.median(results[name]["cpu_seconds"]) / loader_cpu
        verdict = ""
        if name == "strict":
            ok = ratio >= RATIO_TARGET
            met = met and ok
            verdict = f" — target >= {RATIO_TARGET:g}x: {'met' if ok else 'MISSED'}"
        print(f"  loader vs {name}: {ratio:.1f}x wall, {cpu_ratio:.1f}x CPU{verdict}")
    return met


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100000")
    parser.add_argument("--repeats", type=int, default=3, help="timed loads per child")
    parser.add_argument(
        "--rounds",
        type=int,
        default=1,
        help="children per path, the paths taking turns (medians are over every load)",
    )
    parser.add_argument(
        "--before", type=Path, help="a source tree whose load_eval is timed as 'before'"
    )
    parser.add_argument("--keep", type=Path, help="write the eval files here and keep them")
    parser.add_argument(
        "--drop",
        default="",
        help="case keys left out of every line, comma-separated (e.g. "
        "expected_citations,expected_associations: 300 bytes a case, the issue's 28 MB file)",
    )
    parser.add_argument("--child", nargs=2, metavar=("PATH", "EVAL"), help=argparse.SUPPRESS)
    parser.add_argument("--tree", type=Path, default=ROOT, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(args.child[0], Path(args.child[1]), args.repeats, args.tree)
        return 0
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from synthetic import write_eval

    work = args.keep or Path(tempfile.mkdtemp(prefix="loader-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    met = True
    try:
        for size in (int(text) for text in args.sizes.split(",")):
            dropped = tuple(key for key in args.drop.split(",") if key)
            eval_path = (
                work / f"eval-{size}{'-without-' + '-'.join(dropped) if dropped else ''}.jsonl"
            )
            if not eval_path.exists():
                write_eval(eval_path, size, dropped)
            met = _measure(size, eval_path, args.repeats, args.rounds, args.before) and met
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())

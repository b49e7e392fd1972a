"""Benchmark the analyst surface at scale: the report and the drift frames.

Makes (with :mod:`taguru_eval.demo.synthetic`, the generator the tests use)
a run store holding one 100,000-case run, and a second holding a 100-run
history of 10,000-case runs. Then, each in a fresh child process, three
times, it times:

* ``report`` of the 100,000-case stored run (``python -m taguru_eval report
  RUN -o report.html``, i.e. ``cli.report.main``);
* ``report`` of the newest run of the 100-run history against the run
  before it (``--base``), which adds the drift section over every run and
  the compare section;
* ``drift`` over the 100-run history: the run index, the metric history and
  its chart spec, the per-case history of recall@k (1,000,000 rows) and its
  chart spec — what the drift notebook computes.

It prints the median seconds (inside the child, imports excluded; the
child's whole wall time is shown too), the child's peak resident memory
(VmHWM) and the report's file size, side by side.

    .venv/bin/python benchmarks/analyst_scale.py [--cases N] [--runs R --run-cases M]
                                                 [--keep DIR [--reuse]]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
REPEATS = 3

_PEAK = """
peak = 0
with open("/proc/self/status") as status:
    for line in status:
        if line.startswith("VmHWM:"):
            peak = int(line.split()[1])
"""

_REPORT = (
    """
import io, sys, time
sys.path.insert(0, {root!r})
from taguru_eval.cli.report import main
start = time.perf_counter()
code = main({argv!r}, stdout=io.StringIO(), stderr=sys.stderr)
elapsed = time.perf_counter() - start
"""
    + _PEAK
    + """
print(code, elapsed, peak)
"""
)

_DRIFT = (
    """
import sys, time
sys.path.insert(0, {root!r})
from taguru_eval.analyst import charts, drift
start = time.perf_counter()
runs = drift.run_index({store!r}, "synthetic")
history = drift.metric_history({store!r}, "synthetic")
charts.drift_chart(history, runs=runs).to_dict()
cases = drift.case_history({store!r}, "synthetic", columns=["recall_at_k"])
cells = drift.case_metric_long(cases, "recall.recall_at_k")
charts.case_heatmap(cells, "recall.recall_at_k").to_dict()
elapsed = time.perf_counter() - start
assert runs.height == {runs}, runs.height
assert cells.height == {runs} * {run_cases}, cells.height
"""
    + _PEAK
    + """
print(0, elapsed, peak)
"""
)


def _child(code: str) -> tuple[float, float, int]:
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=1800
    )
    wall = time.perf_counter() - started
    if done.returncode != 0 or not done.stdout.strip():
        raise SystemExit(f"child failed ({done.returncode}): {done.stderr[-2000:]}")
    status, elapsed, peak = done.stdout.split()
    if status != "0":
        raise SystemExit(f"child exited {status}: {done.stderr[-2000:]}")
    return float(elapsed), wall, int(peak)


def _measure(name: str, code: str, out: Path | None = None) -> str:
    seconds: list[float] = []
    walls: list[float] = []
    peak = 0
    for _ in range(REPEATS):
        elapsed, wall, kib = _child(code)
        seconds.append(elapsed)
        walls.append(wall)
        peak = max(peak, kib)
    size = f", file {out.stat().st_size / 1e6:.1f} MB" if out is not None else ""
    return (
        f"{name:<46} median {statistics.median(seconds):6.2f} s "
        f"(runs {', '.join(f'{s:.2f}' for s in seconds)}; child wall "
        f"{statistics.median(walls):.2f} s), peak {peak / 1024:5.0f} MiB{size}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=100_000, help="cases of the single run")
    parser.add_argument("--runs", type=int, default=100, help="runs of the history")
    parser.add_argument("--run-cases", type=int, default=10_000, help="cases per history run")
    parser.add_argument("--keep", type=Path, help="write the stores here and keep them")
    parser.add_argument("--reuse", action="store_true", help="with --keep: reuse the stores")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    from taguru_eval.demo import synthetic

    work = args.keep or Path(tempfile.mkdtemp(prefix="analyst-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    big, history = work / "big", work / "history"
    try:
        if not (args.reuse and big.is_dir() and history.is_dir()):
            shutil.rmtree(big, ignore_errors=True)
            shutil.rmtree(history, ignore_errors=True)
            started = time.perf_counter()
            templates = synthetic.build_templates()
            synthetic.synthetic_run(big, templates, args.cases, 0)
            made_big = time.perf_counter() - started
            synthetic.synthetic_history(
                history, cases=args.run_cases, runs=args.runs, templates=templates
            )
            print(
                f"generated a {args.cases}-case run in {made_big:.1f} s and a "
                f"{args.runs} x {args.run_cases}-case history in "
                f"{time.perf_counter() - started - made_big:.1f} s"
            )
        big_run = synthetic.stored_run(big, 0)
        newest = synthetic.stored_run(history, args.runs - 1)
        previous = synthetic.stored_run(history, args.runs - 2)
        big_out, history_out = work / "report-big.html", work / "report-history.html"
        print(f"{'measured (3 child processes each)':<46} figures")
        print(
            _measure(
                f"report, {args.cases}-case stored run",
                _REPORT.format(root=str(ROOT), argv=[str(big_run), "-o", str(big_out)]),
                big_out,
            )
        )
        argv_history = [str(newest), "--base", str(previous), "-o", str(history_out)]
        print(
            _measure(
                f"report --base, {args.runs} x {args.run_cases} history",
                _REPORT.format(root=str(ROOT), argv=argv_history),
                history_out,
            )
        )
        print(
            _measure(
                f"drift, {args.runs} x {args.run_cases} history",
                _DRIFT.format(
                    root=str(ROOT), store=str(history), runs=args.runs, run_cases=args.run_cases
                ),
            )
        )
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

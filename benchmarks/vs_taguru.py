"""taguru_eval against taguru's own ``evaluate``, on the real taguru server.

Starts ``taguru serve`` from ``TAGURU_BIN`` on loopback with a fresh data
directory, puts each shape's corpus in, and runs taguru's ``evaluate`` and
``python -m taguru_eval`` (at its default settings unless told otherwise)
against the same server in one run, in turns (A B, then B A), each a fresh
process. For each shape it prints the medians of ``--runs`` pairs:

* wall: from start to exit of the evaluating process;
* client CPU per case: user + system time of that process (``wait4``);
* server CPU per case: the server's user + system ticks over the same run
  (``/proc/<pid>/stat``);
* client peak: the process's peak resident set (``ru_maxrss``);
* and each as a ratio to taguru's.

Shapes (``--shapes``):

* ``demo``: ``data/sake``'s eval cases repeated to ``--cases`` (20,000);
* ``search``: one search a case, ten hits of real text each, over a generated
  collection of ``--documents`` (1,400) sources (``search_corpus.py``), or a
  public collection in the BEIR layout given with ``--collection DIR``;
* ``demo16``: the 16-case demo itself, ``--small-runs`` (7) pairs;
* ``proxy``: the demo shape, ``--proxy-cases`` (3,000), through a loopback
  proxy that delays every request by ``--delay-ms`` (1 ms,
  ``latency_proxy.py``), whose own CPU is printed too.

Before the timed runs, one pair per shape is compared: every case's outcome in
the two evaluation.json files must be the same (latencies aside), or the
script stops.

    TAGURU_BIN=… .venv/bin/python benchmarks/vs_taguru.py [--runs 3] [--cases 20000]
        [--search-cases 20000] [--documents 1400] [--proxy-cases 3000]
        [--shapes demo,search,demo16,proxy] [--concurrency N] [--no-store]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))  # the real-taguru harness of the differential tests
sys.path.insert(0, str(Path(__file__).resolve().parent))

from search_corpus import converted, generated  # noqa: E402
from support.taguru import RealTaguru, populate, require_taguru  # noqa: E402
from synthetic import DEMO_EVAL, write_eval  # noqa: E402

TICKS = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class Measured:
    """One evaluating process."""

    wall_s: float
    cpu_s: float
    peak_mib: float
    server_s: float
    proxy_s: float
    exit_code: int


def cpu_seconds(pid: int) -> float:
    """User + system CPU of a running process, from ``/proc/<pid>/stat``."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / TICKS  # utime, stime


LAUNCHER = """
import json, os, subprocess, sys, time
for line in sys.stdin:
    job = json.loads(line)
    with open(job["stderr"], "w") as stderr:
        started = time.monotonic()
        child = subprocess.Popen(
            job["argv"], cwd=job["cwd"], stdout=subprocess.DEVNULL, stderr=stderr
        )
        _, status, usage = os.wait4(child.pid, 0)
        wall = time.monotonic() - started
    print(json.dumps({"exit": os.waitstatus_to_exitcode(status), "wall": wall,
                      "cpu": usage.ru_utime + usage.ru_stime, "peak_kib": usage.ru_maxrss}),
          flush=True)
"""


class Launcher:
    """A small process that starts the measured commands and reports their ``wait4`` usage.

    A child's peak resident set (``ru_maxrss``) counts the memory of the process
    it was forked from until it calls exec; forked from this script (Polars and
    pytest loaded), a 12 MiB taguru run would read as 140 MiB. The launcher is an
    interpreter without site packages, forked once.
    """

    def __init__(self) -> None:
        self._process = subprocess.Popen(
            [sys.executable, "-I", "-S", "-c", LAUNCHER],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

    def run(self, command: Sequence[str], cwd: Path) -> dict[str, Any]:
        assert self._process.stdin is not None and self._process.stdout is not None
        job = {"argv": list(command), "cwd": str(cwd), "stderr": str(cwd / "stderr.txt")}
        self._process.stdin.write(json.dumps(job) + "\n")
        self._process.stdin.flush()
        report: dict[str, Any] = json.loads(self._process.stdout.readline())
        return report

    def close(self) -> None:
        assert self._process.stdin is not None
        self._process.stdin.close()
        self._process.wait()


def measure(
    launcher: Launcher, command: Sequence[str], cwd: Path, server: int, proxy: int | None
) -> Measured:
    """Run ``command`` to its end; its CPU and peak from ``wait4``, the others' from /proc."""
    server_before = cpu_seconds(server)
    proxy_before = cpu_seconds(proxy) if proxy else 0.0
    report = launcher.run(command, cwd)
    if report["exit"] not in (0, 3):
        sys.exit(f"{command[0]} exited {report['exit']}: {(cwd / 'stderr.txt').read_text()}")
    return Measured(
        wall_s=report["wall"],
        cpu_s=report["cpu"],
        peak_mib=report["peak_kib"] / 1024,
        server_s=cpu_seconds(server) - server_before,
        proxy_s=(cpu_seconds(proxy) - proxy_before) if proxy else 0.0,
        exit_code=report["exit"],
    )


def store_folder(url: str, folder: Path) -> str:
    """Put a context folder into the server with ``taguru_eval.load`` (batched under
    taguru's caps); returns the context name."""
    return populate(url, folder)


@contextmanager
def latency_proxy(upstream: str, delay_ms: float) -> Iterator[tuple[str, int]]:
    """A running ``latency_proxy.py`` in front of ``upstream``: (its URL, its pid)."""
    script = Path(__file__).resolve().parent / "latency_proxy.py"
    host_port = upstream.removeprefix("http://")
    process = subprocess.Popen(
        [sys.executable, str(script), "--upstream", host_port, "--delay-ms", str(delay_ms)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        yield "http://" + line.removeprefix("listening on ").strip(), process.pid
    finally:
        process.terminate()
        process.wait()


@dataclass
class Shape:
    title: str
    eval_path: Path
    context: str
    cases: int
    runs: int
    url: str
    proxy_pid: int | None = None


def _outcomes(path: Path) -> list[Any]:
    """Every case's lane outcomes, latencies left out (what the two tools must agree on)."""

    def strip(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: strip(v) for k, v in value.items() if "latency" not in k}
        if isinstance(value, list):
            return [strip(v) for v in value]
        return value

    document = json.loads(path.read_text("utf-8"))
    return [strip(case) for case in document["cases"]]


def commands(
    shape: Shape, binary: Path, work: Path, args: argparse.Namespace
) -> dict[str, list[str]]:
    ours = [sys.executable, "-m", "taguru_eval", "--eval", str(shape.eval_path)]
    ours += ["--context", shape.context, "--url", shape.url, "--out", str(work / "ours.json")]
    if args.concurrency is not None:
        ours += ["--concurrency", str(args.concurrency)]
    if args.no_store:
        ours.append("--no-store")
    theirs = [str(binary), "evaluate", "--eval", str(shape.eval_path), "--context", shape.context]
    theirs += ["--url", shape.url, "--out", str(work / "taguru.json")]
    return {"taguru evaluate": theirs, "taguru_eval": ours}


def run_shape(
    launcher: Launcher, shape: Shape, binary: Path, server_pid: int, args: argparse.Namespace
) -> None:
    with tempfile.TemporaryDirectory(prefix="vs-taguru-") as scratch:
        work = Path(scratch)
        sides = commands(shape, binary, work, args)
        # One pair first, compared and not timed (it also warms the server's caches).
        for command in sides.values():
            measure(launcher, command, work, server_pid, shape.proxy_pid)
        theirs, ours = _outcomes(work / "taguru.json"), _outcomes(work / "ours.json")
        if theirs != ours:
            differing = sum(1 for a, b in zip(theirs, ours, strict=False) if a != b)
            sys.exit(f"{shape.title}: {differing} case(s) differ from taguru's evaluation.json")
        taken: dict[str, list[Measured]] = {name: [] for name in sides}
        names = list(sides)
        for turn in range(shape.runs):
            for name in names if turn % 2 == 0 else names[::-1]:
                taken[name].append(
                    measure(launcher, sides[name], work, server_pid, shape.proxy_pid)
                )
    report(shape, taken)


def _median(values: Sequence[float]) -> float:
    return statistics.median(values)


def report(shape: Shape, taken: dict[str, list[Measured]]) -> None:
    load = os.getloadavg()[0]
    title = f"{shape.title}: {shape.cases:,} cases, medians of {shape.runs} run(s)"
    print(f"\n{title}, load {load:.2f}")
    head = f"  {'':16} {'wall':>9} {'client CPU/case':>16} {'server CPU/case':>16}"
    head += f" {'client peak':>12}"
    if shape.proxy_pid:
        head += f" {'proxy CPU/case':>15}"
    print(head)
    rows: dict[str, tuple[float, ...]] = {}
    for name, runs in taken.items():
        wall = _median([m.wall_s for m in runs])
        cpu = _median([m.cpu_s for m in runs]) / shape.cases * 1e6
        server = _median([m.server_s for m in runs]) / shape.cases * 1e6
        peak = _median([m.peak_mib for m in runs])
        proxy = _median([m.proxy_s for m in runs]) / shape.cases * 1e6
        rows[name] = (wall, cpu, server, peak, proxy)
        line = f"  {name:16} {wall:8.3f}s {cpu:13,.0f} µs {server:13,.0f} µs {peak:8,.0f} MiB"
        if shape.proxy_pid:
            line += f" {proxy:12,.0f} µs"
        print(line)
        spread = ", ".join(f"{m.wall_s:.2f}" for m in runs)
        print(f"  {'':16} walls: {spread}")
    base, ours = rows["taguru evaluate"], rows["taguru_eval"]
    print(
        f"  {'ratio':16} {ours[0] / base[0]:8.2f}× {ours[1] / base[1]:14.2f}× "
        f"{ours[2] / base[2]:14.2f}× {ours[3] / base[3]:10.2f}×"
    )


SHAPES = ("demo", "search", "demo16", "proxy")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--small-runs", type=int, default=7, help="pairs of the 16-case run")
    parser.add_argument("--cases", type=int, default=20_000, help="demo-shaped cases")
    parser.add_argument("--search-cases", type=int, default=20_000)
    parser.add_argument("--documents", type=int, default=1_400, help="generated search sources")
    parser.add_argument("--collection", type=Path, help="a BEIR-layout collection instead")
    parser.add_argument("--proxy-cases", type=int, default=3_000)
    parser.add_argument("--delay-ms", type=float, default=1.0)
    parser.add_argument("--shapes", default=",".join(SHAPES))
    parser.add_argument("--concurrency", type=int, help="taguru_eval's --concurrency")
    parser.add_argument(
        "--no-store", action="store_true", help="taguru_eval without its run store (on by default)"
    )
    args = parser.parse_args(argv)
    shapes = [shape for shape in args.shapes.split(",") if shape]
    unknown = set(shapes) - set(SHAPES)
    if unknown:
        parser.error(f"unknown shape(s): {', '.join(sorted(unknown))}")
    binary = Path(os.environ.get("TAGURU_BIN", "taguru"))
    try:
        require_taguru()
    except BaseException as exc:  # pytest's skip outside pytest
        sys.exit(f"vs_taguru: {exc}")
    print(f"{binary} against {sys.executable} -m taguru_eval, {os.cpu_count()} CPU(s)")
    launcher = Launcher()
    with (
        tempfile.TemporaryDirectory(prefix="vs-taguru-data-") as scratch,
        RealTaguru(binary) as server,
    ):
        work = Path(scratch)
        runs: list[tuple[str, Callable[[], Shape]]] = []
        if {"demo", "demo16", "proxy"} & set(shapes):
            store_folder(server.url, ROOT / "data" / "sake")

        def demo() -> Shape:
            path = write_eval(work / "demo.eval.jsonl", args.cases)
            return Shape("demo-shaped", path, "sake", args.cases, args.runs, server.url)

        def search() -> Shape:
            if args.collection is not None:
                corpus, path = converted(args.collection, work, args.search_cases)
            else:
                corpus, path = generated(work, args.documents, args.search_cases)
            context = store_folder(server.url, corpus)
            title = f"search-only ({len(list(corpus.rglob('*.md'))):,} documents, limit 10)"
            return Shape(title, path, context, args.search_cases, args.runs, server.url)

        def demo16() -> Shape:
            return Shape("the 16-case demo run", DEMO_EVAL, "sake", 16, args.small_runs, server.url)

        runs = [("demo", demo), ("search", search), ("demo16", demo16)]
        for name, build in runs:
            if name in shapes:
                run_shape(launcher, build(), binary, server.pid, args)
        if "proxy" in shapes:
            with latency_proxy(server.url, args.delay_ms) as (url, pid):
                path = write_eval(work / "proxy.eval.jsonl", args.proxy_cases)
                title = f"demo-shaped through a {args.delay_ms:g} ms latency proxy"
                shape = Shape(title, path, "sake", args.proxy_cases, args.runs, url, pid)
                run_shape(launcher, shape, binary, server.pid, args)
    launcher.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())

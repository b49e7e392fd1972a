"""Benchmark ``compare`` on two synthetic 100,000-case runs.

Writes two evaluation.json files shaped like real ones (ten scored hits per
case with lane ranks, recall/coverage/citation blocks, pretty-printed as the
artifact is) into a temporary directory, plus the same two runs as stored run
directories written by the run store itself (``store.write_run``:
``runs/context=<ctx>/run=<id>/`` with ``cases.parquet`` and
``metrics.parquet`` built from the artifact by the same readers ``ingest``
uses, and the evaluation.json beside them). Then times the whole
``python -m taguru_eval compare`` work — load both sides, join, classify,
write changes.jsonl — three times per form, each in a fresh child process,
and prints the median seconds (of ``compare.main``, imports excluded; the
child's whole wall time is shown too) and the child's peak resident memory
(VmHWM). Both forms must write the same changes.jsonl (apart from the header's
paths and generated_at); the script checks that.

Targets (issue 5): at most 2 s from the Parquet store, at most 15 s from
evaluation.json files.

    .venv/bin/python benchmarks/compare_bench.py [--cases N] [--keep DIR [--reuse]]
        [--repeats N] [--tree DIR]

``--tree DIR`` times another checkout's compare (say the tree before a change)
in turn with this one's and prints the ratios; its changes.jsonl is not checked.
"""

from __future__ import annotations

import argparse
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import msgspec

ROOT = Path(__file__).resolve().parents[1]
REPEATS = 3
STORE_TARGET_S = 2.0
JSON_TARGET_S = 15.0

_CHILD = """
import resource, sys, time
sys.path.insert(0, {root!r})
from taguru_eval.cli.compare import main
import io
start, cpu = time.perf_counter(), time.process_time()
code = main([{base!r}, {head!r}, "--out", {out!r}], stdout=io.StringIO(), stderr=io.StringIO())
elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
# VmHWM is this process image's own peak (ru_maxrss would include the
# parent's footprint inherited across fork/exec).
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
try:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                peak = int(line.split()[1])
except OSError:
    pass
print(code, elapsed, cpu, peak)
"""


def _case(index: int, rnd: random.Random, shift: float) -> dict[str, Any]:
    hits = [
        {
            "source": f"corpus/doc{rnd.randrange(500)}.md",
            "paragraph": rnd.randrange(40),
            "score": round(rnd.random() * 10, 6),
            "lanes": {"bm25": {"rank": rank + 1, "score": round(rnd.random() * 10, 6)}},
        }
        for rank in range(10)
    ]
    recall = min(1.0, max(0.0, rnd.choice([0.0, 0.5, 1.0]) + shift))
    block: dict[str, Any] = {
        "case_id": f"case-{index:06d}",
        "query": f"how does step {index} of the brewing process change the rice polishing ratio",
        "limit": 10,
        "passage": {
            "outcome": "searched",
            "plan": {
                "context": "sake",
                "lanes": {
                    "bm25": {"ran": True},
                    "vector": {"ran": False, "reason": "no embedding provider is configured"},
                },
            },
            "hits": hits,
            "latency_ms": rnd.randrange(1, 50),
        },
        "recall": {
            "recall_at_k": recall,
            "mrr": rnd.choice([0.0, 0.25, 0.5, 1.0]),
            "ndcg": rnd.random(),
            "expected_total": 2,
            "matched": 1,
        },
        "lane_cross": {"structural_hit": False, "passage_hit": True},
        "missed": ["corpus/doc1.md#3"],
        "missed_truncated": 0,
        "diversity_sources": len({hit["source"] for hit in hits}),
    }
    if index % 3 == 0:
        block["coverage"] = {"concepts": {"expected": 2, "matched": 1, "value": 0.5}}
    if index % 4 == 0:
        block["citations"] = {
            "recall": {"expected_total": 1, "matched": 1, "value": 1.0},
            "validity": {"expected_total": 1, "valid": 1, "value": rnd.choice([0.0, 1.0])},
            "checks": [
                {
                    "source": "corpus/doc1.md",
                    "paragraph": 2,
                    "served": True,
                    "outcome": "resolved",
                    "section": {"check": "not_checked"},
                    "latency_ms": 3,
                }
            ],
        }
    return block


def _document(cases: int, seed: int, *, head: bool) -> dict[str, Any]:
    from taguru_eval.catalog import definitions

    rnd = random.Random(seed)
    # HEAD drops the first 1% of case ids and adds 1% new ones; its values
    # are re-drawn, so most cases change one way or the other.
    start = cases // 100 if head else 0
    blocks = [_case(i, rnd, 0.0) for i in range(start, cases + start)]
    defs = definitions()
    metrics = {
        name: (
            {"n": cases, "min": 0.0, "p50": 0.5, "p90": 1.0, "p99": 1.0, "max": 1.0}
            | {"mean": rnd.random(), "sum": cases * 0.5}
            if definition["statistic"] == "distribution"
            else {"value": 0.5, "n": cases, "numerator": cases // 2}
        )
        for name, definition in defs.items()
    }
    return {
        "taguru_evaluation": 1,
        "generated_at": "2026-07-29T09:30:00Z" if head else "2026-07-28T10:00:00Z",
        "inputs": {"context": "sake", "mode": "baseline", "concurrency": 8},
        "corpus": {
            "revision_after": {"graph": 3, "passages": 5, "config": 1},
            "stable": True,
        },
        "thresholds": None,
        "definitions": defs,
        "cases": blocks,
        "metrics": metrics,
    }


def _write_pretty(path: Path, doc: dict[str, Any]) -> None:
    # msgspec keeps generation to seconds; the bytes are the artifact's layout.
    path.write_bytes(msgspec.json.format(msgspec.json.encode(doc), indent=2))


def _store_run(store: Path, run_id: str, doc: dict[str, Any], artifact: Path) -> Path:
    """Write ``doc`` as a stored run: the ``cases`` and ``metrics`` tables
    (what compare reads from a run directory) built by the artifact readers
    that ``ingest`` uses, cast to the store's schemas by ``store.write_run``,
    and ``artifact``'s text as its evaluation.json. The lane tables (calls,
    hits, …) are left out: compare never reads them, and building ten hits
    per case for 100,000 cases would only slow generation down."""
    from taguru_eval.artifact.read import cases_from_artifact
    from taguru_eval.store import RunOrigin, write_run
    from taguru_eval.tables.schemas import metrics_frame

    statistics = {name: str(entry["statistic"]) for name, entry in doc["definitions"].items()}
    frames = {
        "cases": cases_from_artifact(doc, run_id),
        "metrics": metrics_frame(doc["metrics"], run_id, statistics),
    }
    context = str(doc["inputs"]["context"])
    return write_run(
        store, context, run_id, frames, artifact.read_text("utf-8"), origin=RunOrigin("run")
    )


Timing = tuple[list[float], list[float], list[float], int]
"""Per repeat: seconds inside ``compare.main``, its CPU seconds and the child's
whole wall time; and the highest VmHWM (KiB) over the repeats."""


def _time(
    base: Path, head: Path, out: Path, roots: list[Path], repeats: int = REPEATS
) -> list[Timing]:
    """One :data:`Timing` per checkout in ``roots``, taking turns repeat by repeat
    (A B A B), so a machine whose speed drifts weighs on each alike."""
    timings: list[Timing] = [([], [], [], 0) for _ in roots]
    for _ in range(repeats):
        for index, root in enumerate(roots):
            target = out if index == 0 else out.with_name(f"{out.stem}-tree{out.suffix}")
            child = _CHILD.format(root=str(root), base=str(base), head=str(head), out=str(target))
            started = time.perf_counter()
            done = subprocess.run(
                [sys.executable, "-c", child],
                capture_output=True,
                text=True,
                check=True,
                timeout=300,
            )
            seconds, cpus, walls, peak_kib = timings[index]
            walls.append(time.perf_counter() - started)
            code, elapsed, cpu, peak = done.stdout.split()
            if code != "0":
                raise SystemExit(f"compare exited {code}: {done.stderr}")
            seconds.append(float(elapsed))
            cpus.append(float(cpu))
            timings[index] = (seconds, cpus, walls, max(peak_kib, int(peak)))
    return timings


def _report(form: str, target: float | None, timing: Timing) -> bool:
    seconds, cpus, walls, peak = timing
    median = statistics.median(seconds)
    met = target is None or median <= target
    verdict = "" if target is None else f" — target <= {target:g} s: {'met' if met else 'MISSED'}"
    print(
        f"{form}: median {median:.2f} s, CPU {statistics.median(cpus):.2f} s "
        f"(runs {', '.join(f'{s:.2f}' for s in seconds)}; "
        f"child wall median {statistics.median(walls):.2f} s with imports), "
        f"peak memory (VmHWM) {peak / 1024:.0f} MiB{verdict}"
    )
    return met


def _against_tree(form: str, ours: Timing, tree: Timing) -> None:
    _report(f"  the --tree checkout, {form}", None, tree)
    wall = statistics.median(ours[0]) / statistics.median(tree[0])
    cpu = statistics.median(ours[1]) / statistics.median(tree[1])
    print(f"  this checkout / the --tree checkout: {wall:.2f}x wall, {cpu:.2f}x CPU")


def _comparable(path: Path) -> list[object]:
    """changes.jsonl without what legitimately differs between the two forms."""
    import json

    lines = path.read_text("utf-8").splitlines()
    header = json.loads(lines[0])
    header.pop("generated_at")
    for side in ("base", "head"):
        header[side].pop("path")
    return [header, *lines[1:]]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=100_000)
    parser.add_argument("--keep", type=Path, help="write the files here and keep them")
    parser.add_argument(
        "--reuse",
        action="store_true",
        help="with --keep: reuse the files and run store found there",
    )
    parser.add_argument("--repeats", type=int, default=REPEATS, help="children per form")
    parser.add_argument(
        "--tree",
        type=Path,
        help="another checkout whose compare is timed in turn with this one's (before/after)",
    )
    args = parser.parse_args(argv)
    roots = [ROOT] if args.tree is None else [ROOT, args.tree.resolve()]
    sys.path.insert(0, str(ROOT))
    work = args.keep or Path(tempfile.mkdtemp(prefix="compare-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        started = time.perf_counter()
        base, head = work / "base.json", work / "head.json"
        store = work / "runs"
        reuse = args.reuse and base.exists() and head.exists() and store.exists()
        run_dirs: list[Path] = []
        if reuse:
            run_dirs = sorted(store.glob("context=*/run=*"))
        else:
            shutil.rmtree(store, ignore_errors=True)
            # One document at a time, so generation holds one run in memory.
            for path, seed, is_head, run_id in (
                (base, 1, False, "20260728T100000.000000Z-base00"),
                (head, 2, True, "20260729T093000.000000Z-head00"),
            ):
                doc = _document(args.cases, seed, head=is_head)
                _write_pretty(path, doc)
                run_dirs.append(_store_run(store, run_id, doc, path))
                del doc
        size_mb = (base.stat().st_size + head.stat().st_size) / 1e6
        table_mb = sum(p.stat().st_size for d in run_dirs for p in d.glob("*.parquet")) / 1e6
        print(
            f"{'reused' if reuse else 'generated'} 2 x {args.cases} cases "
            f"({size_mb:.0f} MB of evaluation.json, {table_mb:.1f} MB of Parquet tables) "
            f"in {time.perf_counter() - started:.1f} s"
        )
        json_out, store_out = work / "changes-json.jsonl", work / "changes-store.jsonl"
        from_json = _time(base, head, json_out, roots, args.repeats)
        from_store = _time(run_dirs[0], run_dirs[1], store_out, roots, args.repeats)
        lines = sum(1 for _ in json_out.open("rb"))
        print(f"changes.jsonl: {lines} lines")
        met = _report("evaluation.json files", JSON_TARGET_S, from_json[0])
        if args.tree is not None:
            _against_tree("evaluation.json files", from_json[0], from_json[1])
        met = _report("Parquet run store", STORE_TARGET_S, from_store[0]) and met
        if args.tree is not None:
            _against_tree("Parquet run store", from_store[0], from_store[1])
        if _comparable(json_out) != _comparable(store_out):
            raise SystemExit("the two forms wrote different changes.jsonl")
        print("both forms wrote the same changes.jsonl (apart from paths and generated_at)")
        generation_peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(f"(generator process peak RSS {generation_peak:.0f} MiB, not part of compare)")
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())

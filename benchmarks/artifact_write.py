"""Benchmark writing a 100,000-case evaluation.json: the old recursive writer against msgspec.

Builds the document as a run does (``synthetic.artifact_document``: the
demo's real lane outputs repeated under fresh case ids with fresh binary32
scores, through the pipeline's table builder, scorer and artifact builder;
not timed), then times, side by side in one process:

* encode: the old pure-Python writer (``tests/support/serde_json_oracle.dumps_json``,
  the code this replaced) + UTF-8 vs ``text.encode_json``;
* run: what a run with the store on does after scoring — before, the
  artifact written by ``write_json_atomic`` from the old writer's text and the
  stored copy written from a second encoding (``store.write_run`` with the
  text); now, ``write_json_atomic`` (one encoding) and ``store.write_run``
  copying the written file.

Every output is checked byte for byte: the old and new encodings, and the
four files written. Medians of ``--repeats`` (new) and ``--old-repeats``
(old, slow) runs. Target (issue 15): at least 10x.

    .venv/bin/python benchmarks/artifact_write.py [--cases 100000] [--repeats 5] [--old-repeats 1]
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
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RATIO_TARGET = 10.0


def _timed(action: Callable[[], object], repeats: int) -> tuple[list[float], object]:
    seconds: list[float] = []
    result: object = None
    for _ in range(repeats):
        result = None
        gc.collect()
        started = time.perf_counter()
        result = action()
        seconds.append(time.perf_counter() - started)
    return seconds, result


def _line(name: str, seconds: list[float]) -> str:
    runs = ", ".join(f"{value:.2f}" for value in seconds)
    return f"  {name:<28} median {statistics.median(seconds):8.3f} s (runs {runs})"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--old-repeats", type=int, default=1)
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    sys.path.insert(0, str(ROOT / "tests"))
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from support.serde_json_oracle import dumps_json as old_dumps_json
    from synthetic import artifact_document

    from taguru_eval._base.files import write_bytes_atomic
    from taguru_eval._base.text import encode_json
    from taguru_eval.artifact.build import write_json_atomic
    from taguru_eval.store import RunOrigin, write_run

    print("load average at start: " + ", ".join(f"{load:.1f}" for load in os.getloadavg()))
    started = time.perf_counter()
    doc = artifact_document(args.cases)
    print(f"built a {args.cases:,}-case document in {time.perf_counter() - started:.1f} s")

    old_seconds, old_bytes = _timed(
        lambda: old_dumps_json(doc, 2).encode("utf-8"), args.old_repeats
    )
    new_seconds, new_bytes = _timed(lambda: encode_json(doc, 2), args.repeats)
    assert isinstance(old_bytes, bytes) and isinstance(new_bytes, bytes)
    if new_bytes != old_bytes:
        raise SystemExit("the encodings differ")
    print(f"\nencode ({len(new_bytes) / 1e6:,.0f} MB, byte-identical):")
    print(_line("old recursive writer", old_seconds))
    print(_line("msgspec + Polars binary32", new_seconds))
    encode_ratio = statistics.median(old_seconds) / statistics.median(new_seconds)
    print(f"  ratio {encode_ratio:.1f}x")

    work = Path(tempfile.mkdtemp(prefix="artifact-bench-"))
    try:

        def old_run() -> Path:
            out, store = work / "old.json", work / "old-runs"
            shutil.rmtree(store, ignore_errors=True)
            write_bytes_atomic(out, old_dumps_json(doc, 2).encode("utf-8"))
            return write_run(
                store, "sake", "old", {}, old_dumps_json(doc, 2), origin=RunOrigin("run")
            )

        def new_run() -> Path:
            out, store = work / "new.json", work / "new-runs"
            shutil.rmtree(store, ignore_errors=True)
            write_json_atomic(out, doc)
            return write_run(store, "sake", "new", {}, out, origin=RunOrigin("run"))

        old_run_seconds, old_stored = _timed(old_run, args.old_repeats)
        new_run_seconds, new_stored = _timed(new_run, args.repeats)
        assert isinstance(old_stored, Path) and isinstance(new_stored, Path)
        files = [
            work / "old.json",
            old_stored / "evaluation.json",
            work / "new.json",
            new_stored / "evaluation.json",
        ]
        if any(path.read_bytes() != new_bytes for path in files):
            raise SystemExit("a written file differs from the encoding")
        print("\nrun (evaluation.json + the stored copy; all four files byte-identical):")
        print(_line("before: two encodings", old_run_seconds))
        print(_line("now: one encoding + copy", new_run_seconds))
        run_ratio = statistics.median(old_run_seconds) / statistics.median(new_run_seconds)
        print(f"  ratio {run_ratio:.1f}x")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print("load average at end: " + ", ".join(f"{load:.1f}" for load in os.getloadavg()))
    met = encode_ratio >= RATIO_TARGET and run_ratio >= RATIO_TARGET
    print(f"\ntarget >= {RATIO_TARGET:g}x: {'met' if met else 'MISSED'}")
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())

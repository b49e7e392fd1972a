"""Benchmark the run store's bytes: the old layout against the compact one.

Builds a 100,000-case evaluation.json as a run does (``synthetic.artifact_document``:
the demo's real lane outputs against the reference server, repeated under
fresh case ids with fresh binary32 scores, through the pipeline's table
builder, scorer and artifact builder), writes it with the run's own writer
(``write_json_atomic``) and rebuilds its tables with ``ingest``'s reader. Then
stores that one run twice, side by side:

* old: the layout before this change — the written evaluation.json copied as
  it is, the Parquet tables with pyarrow's default codec (snappy);
* new: ``store.write_run`` given the written file's path — evaluation.json.zst
  streamed through python-zstandard, zstd Parquet tables (Polars' writer).

Prints the bytes of every part of each run directory and the ratio new/old
(target, issue 30: at most 0.25), checks that the new layout's document reads
back byte for byte, and times — medians of ``--repeats``, in this process —
storing the run, ``load_run`` of each directory and ``compare`` of each
directory with itself (the Parquet fast path: the artifact's head plus the
tables), with the ratio new/old (reading must not get much slower).

    .venv/bin/python benchmarks/store_size.py [--cases 100000] [--repeats 3] [--keep DIR]
"""

from __future__ import annotations

import argparse
import gc
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT))
SIZE_TARGET = 0.25


def _old_layout_run(directory: Path, written: Path, frames: dict[str, object]) -> None:
    """A run directory as the store wrote it before: the artifact copied, snappy tables."""
    import pyarrow.parquet as pq

    from taguru_eval.contract import ARTIFACT_NAME
    from taguru_eval.store import ORIGIN_NAME, RunOrigin
    from taguru_eval.tables.schemas import TABLE

    directory.mkdir(parents=True)
    for name, frame in frames.items():
        spec = TABLE[name]
        table = frame.to_arrow().select(spec.arrow.names).cast(spec.arrow)  # type: ignore[attr-defined]
        pq.write_table(table, directory / spec.file_name)
    shutil.copyfile(written, directory / ARTIFACT_NAME)
    import json

    (directory / ORIGIN_NAME).write_text(json.dumps(RunOrigin("run").to_json()), "utf-8")


def _sizes(directory: Path) -> dict[str, int]:
    return {path.name: path.stat().st_size for path in sorted(directory.iterdir())}


def _timed(action: Callable[[], object], repeats: int) -> list[float]:
    seconds = []
    for _ in range(repeats):
        gc.collect()
        start = time.perf_counter()
        action()
        seconds.append(time.perf_counter() - start)
    return seconds


def _mib(size: int) -> str:
    return f"{size / (1 << 20):9.1f} MiB"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--keep", type=Path, help="build in DIR and leave it (default: a temp dir)")
    args = parser.parse_args(argv)

    from synthetic import artifact_document

    from taguru_eval.analyst.ingest import tables_from_document
    from taguru_eval.api import load_run
    from taguru_eval.artifact.build import write_json_atomic
    from taguru_eval.compare import compare
    from taguru_eval.store import RunOrigin, run_dir, write_run
    from taguru_eval.store_artifact import artifact_bytes, stored_artifact

    work = args.keep or Path(tempfile.mkdtemp(prefix="store-size-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        print(f"building a {args.cases:,}-case run (not timed) ...", flush=True)
        doc = artifact_document(args.cases)
        written = work / "evaluation.json"
        write_json_atomic(written, doc)
        frames = tables_from_document(doc, "bench")
        del doc
        old = run_dir(work / "old", "sake", "bench")
        _old_layout_run(old, written, frames)
        new_store = work / "new"

        def store_new() -> Path:
            shutil.rmtree(new_store, ignore_errors=True)
            return write_run(new_store, "sake", "bench", frames, written, origin=RunOrigin("run"))

        store_seconds = _timed(store_new, args.repeats)
        new = run_dir(new_store, "sake", "bench")
        frames.clear()  # the tables are stored: free them before the reads are timed
        if artifact_bytes(stored_artifact(new)) != written.read_bytes():
            print("FAIL: the stored document differs from the written evaluation.json")
            return 1

        old_sizes, new_sizes = _sizes(old), _sizes(new)
        print(f"\n{'part':<28}{'old':>14}{'new':>14}{'new/old':>9}")
        names = sorted(set(old_sizes) | set(new_sizes), key=lambda n: n.replace(".zst", ""))
        pairs = {name.removesuffix(".zst"): name for name in names}
        for base, name in pairs.items():
            before, after = old_sizes.get(base, 0), new_sizes.get(name, 0)
            ratio = f"{after / before:9.3f}" if before else ""
            shown = base if base == name else f"{base}[.zst]"
            print(f"{shown:<28}{_mib(before):>14}{_mib(after):>14}{ratio}")
        old_total, new_total = sum(old_sizes.values()), sum(new_sizes.values())
        ratio = new_total / old_total
        print(f"{'total':<28}{_mib(old_total):>14}{_mib(new_total):>14}{ratio:9.3f}")
        print(f"written evaluation.json: {_mib(written.stat().st_size)}")
        verdict = "met" if ratio <= SIZE_TARGET else "MISSED"
        print(f"stored run, new/old: {ratio:.3f} (target <= {SIZE_TARGET}: {verdict})")
        print(
            f"\nstoring the run (write_run from the file): {statistics.median(store_seconds):.2f} s"
        )

        print(f"\n{'median of ' + str(args.repeats):<28}{'old':>10}{'new':>10}{'new/old':>9}")
        for label, action in (
            ("load_run(dir)", load_run),
            ("compare(dir, dir)", lambda d: compare(d, d)),
        ):
            before = statistics.median(_timed(lambda a=action: a(old), args.repeats))
            after = statistics.median(_timed(lambda a=action: a(new), args.repeats))
            print(f"{label:<28}{before:9.2f}s{after:9.2f}s{after / before:9.2f}")
        return 0 if ratio <= SIZE_TARGET else 1
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())

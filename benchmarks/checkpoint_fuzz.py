"""The checkpoint fuzzer at full strength: every accepted batch whose values changed
resumed end to end, and far more batches than CI mutates.

Runs ``tests/test_resume_fuzz.py`` (seeded mutations of a real run's checkpoint
batches: keys deleted, values retyped or changed, unknown keys, outputs
duplicated, dropped or swapped, bytes flipped, cut, appended or replaced, half
of the value mutations with their digest redone) with ``TAGURU_EVAL_FUZZ_*``
set, and prints what happened to the batches: dropped with a warning, read as
written, read with changed values (a redone digest), and how many whole
``--resume`` runs took them, with how many of those kept the uninterrupted
artifact. Any traceback, a resume that exits other than 0, a dropped batch
without its one warning or an artifact that differs without one fails the test.

    python benchmarks/checkpoint_fuzz.py [--batches 2000] [--seed 44] [--resume-every 10]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=44)
    parser.add_argument(
        "--resume-every",
        type=int,
        default=10,
        help="resume every Nth batch read as written or dropped (every changed one always)",
    )
    args = parser.parse_args()
    report = Path(tempfile.mkdtemp()) / "counts.json"
    env = {
        **os.environ,
        "TAGURU_EVAL_FUZZ_BATCHES": str(args.batches),
        "TAGURU_EVAL_FUZZ_SEED": str(args.seed),
        "TAGURU_EVAL_FUZZ_RESUME_EVERY": str(args.resume_every),
        "TAGURU_EVAL_FUZZ_RESUME_CHANGED_EVERY": "1",
        "TAGURU_EVAL_FUZZ_REPORT": str(report),
    }
    command = [sys.executable, "-m", "pytest", "tests/test_resume_fuzz.py", "-q", "-x",
               "-p", "no:cacheprovider", "-k", "every_mutated"]  # fmt: skip
    started = time.perf_counter()
    result = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)
    elapsed = time.perf_counter() - started
    if result.returncode != 0:
        print(result.stdout[-6000:], result.stderr[-2000:], sep="\n")
        print(f"FAILED after {elapsed:.0f} s")
        return result.returncode
    counts = json.loads(report.read_text(encoding="utf-8"))
    kinds = {
        key.removeprefix("kind "): value for key, value in counts.items() if key.startswith("kind ")
    }
    print(
        f"batches mutated: {counts['batches']} (seed {args.seed}), {elapsed:.0f} s, "
        f"load {os.getloadavg()[0]:.2f}"
    )
    print("  by mutation: " + ", ".join(f"{kind} {n}" for kind, n in sorted(kinds.items())))
    print(f"  dropped with one warning naming the batch: {counts.get('dropped', 0)}")
    print(f"  read as written: {counts.get('accepted, read as written', 0)}")
    print(
        f"  read with changed values (digest redone): {counts.get('accepted, values changed', 0)}"
    )
    print(
        f"  whole --resume runs: {counts.get('resumed', 0)} (every one exit 0, no traceback): "
        f"a batch dropped, warned and its cases sent again, the uninterrupted artifact: "
        f"{counts.get('resumed, dropped and sent again', 0)}; a batch read, the uninterrupted "
        f"artifact: {counts.get('resumed, same artifact', 0)}; a batch read with a redone "
        f"digest's values, another artifact (no warning possible): "
        f"{counts.get('resumed, other values', 0)}"
    )
    print("  tracebacks: 0, silent differences from a damaged batch: 0")
    return 0


if __name__ == "__main__":
    sys.exit(main())

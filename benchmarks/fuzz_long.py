"""The fuzzers at a far higher example count than CI runs them.

Runs ``tests/inputs/test_fuzz_eval_loader.py`` and ``tests/inputs/test_fuzz_thresholds_loader.py``
(their generators produce type flips, unknown keys, deep nesting, huge
integers, control characters, lone surrogates, invalid UTF-8 and random bytes)
and ``tests/run/test_fuzz_server_bodies.py`` (whole demo runs, plain and
``--assembly``, against corrupted server answers; one example per 20
requested, each serving about a hundred bodies) with
``TAGURU_EVAL_FUZZ_EXAMPLES`` set, and prints how many examples each property
really ran (hypothesis' own statistics), how many server bodies were
corrupted, and how long it took. Each property asserts that the input is
either accepted or refused with the project's own error, one printable line.

    python benchmarks/fuzz_long.py [--examples 20000] [--seed 12]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FUZZERS = (
    "tests/inputs/test_fuzz_eval_loader.py",
    "tests/inputs/test_fuzz_thresholds_loader.py",
    "tests/run/test_fuzz_server_bodies.py",
)
# hypothesis --hypothesis-show-statistics prints, per test and phase (reuse, generate):
# "tests/x.py::test_y:" then "    - 45 passing, 0 failing, and 3 invalid test cases"
_TEST = re.compile(r"^(\S+::\S+):$")
_COUNTS = re.compile(r"- (\d+) passing, (\d+) failing, and (\d+) invalid test cases")


def run(examples: int, seed: int) -> int:
    """Run both fuzzers; print one line per property; return pytest's exit code."""
    report = Path(tempfile.mkdtemp()) / "served.json"
    env = {
        **os.environ,
        "TAGURU_EVAL_FUZZ_EXAMPLES": str(examples),
        "TAGURU_EVAL_FUZZ_REPORT": str(report),
    }
    command = [
        sys.executable, "-m", "pytest", *FUZZERS, "-q", "-p", "no:cacheprovider",
        "--hypothesis-show-statistics", f"--hypothesis-seed={seed}",
    ]  # fmt: skip
    started = time.perf_counter()
    result = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)
    elapsed = time.perf_counter() - started
    counts: dict[str, list[int]] = {}
    current = "?"
    for line in result.stdout.splitlines():
        test = _TEST.match(line.strip())
        if test:
            current = test.group(1)
        found = _COUNTS.search(line)
        if found:
            totals = counts.setdefault(current, [0, 0, 0])
            for index, group in enumerate(found.groups()):
                totals[index] += int(group)
    for name, (passing, failing, invalid) in counts.items():
        print(f"{name}: {passing + failing + invalid:,} examples "
              f"({passing:,} passing, {failing:,} failing, {invalid:,} invalid)")  # fmt: skip
    if report.is_file():
        served = json.loads(report.read_text(encoding="utf-8"))
        print(f"server bodies: {served['bodies']:,} served, {served['corrupted']:,} corrupted")
    total = sum(sum(values) for values in counts.values())
    print(f"requested {examples:,} per property; {total:,} examples in {elapsed:.1f} s; "
          f"pytest exit {result.returncode}")  # fmt: skip
    if result.returncode != 0:
        print(result.stdout[-4000:], result.stderr[-2000:], sep="\n")
    return result.returncode


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=20_000)
    parser.add_argument("--seed", type=int, default=12)
    args = parser.parse_args()
    return run(args.examples, args.seed)


if __name__ == "__main__":
    raise SystemExit(main())

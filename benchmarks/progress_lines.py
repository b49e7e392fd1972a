"""Progress in a CI log: the lines a long run writes to a non-terminal stderr.

Runs ``python -m taguru_eval run`` in a child over ``--cases`` demo-shaped cases
against the lean stub (``stub.py``) replaying the reference server's answers to
the demo after ``--delay-ms``, at ``--concurrency``, with stderr a pipe (as in a
CI job), and notes when each progress line arrives. Prints how many lines, how
many repeat a count already shown, the spacing between them (min / median / max)
and the last line, whose average must agree with the run's own count and time.

    .venv/bin/python benchmarks/progress_lines.py [--cases 20000] [--delay-ms 5] [--concurrency 8]
"""

from __future__ import annotations

import argparse
import pickle
import re
import statistics
import subprocess
import sys
import tempfile
import time
from itertools import pairwise
from pathlib import Path

HERE = Path(__file__).resolve().parent
PROGRESS = re.compile(r"^\s+(\d+)/(\d+) case\(s\)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=20_000)
    parser.add_argument("--delay-ms", type=float, default=5.0)
    parser.add_argument("--concurrency", type=int, default=8)
    args = parser.parse_args()
    sys.path.insert(0, str(HERE))
    from end_to_end import record_demo
    from stub import Stub
    from synthetic import write_eval

    with tempfile.TemporaryDirectory(prefix="progress-") as tmp:
        work = Path(tmp)
        answers = pickle.loads(record_demo(work).read_bytes())
        eval_path = write_eval(work / "eval.jsonl", args.cases)
        with Stub(args.delay_ms / 1000, {}, exact=answers) as stub:
            command = [sys.executable, "-m", "taguru_eval", "run", "--eval", str(eval_path)]
            command += ["--context", "sake", "--url", stub.url, "--no-store"]
            command += ["--out", str(work / "evaluation.json")]
            command += ["--concurrency", str(args.concurrency)]
            started = time.monotonic()
            child = subprocess.Popen(
                command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
            )
            assert child.stderr is not None
            lines: list[tuple[float, str]] = []
            for line in child.stderr:
                if PROGRESS.match(line):
                    lines.append((time.monotonic() - started, line.rstrip()))
            child.wait()
        elapsed = time.monotonic() - started
    counts = [int(match.group(1)) for _, text in lines if (match := PROGRESS.match(text))]
    repeats = len(counts) - len(set(counts))
    gaps = [later - earlier for (earlier, _), (later, _) in pairwise(lines)]
    print(
        f"{args.cases:,} cases, stub delay {args.delay_ms:g} ms, --concurrency "
        f"{args.concurrency}: {len(lines)} progress line(s) over {elapsed:.1f} s, "
        f"{repeats} repeating a count (exit {child.returncode})"
    )
    if gaps:
        print(
            f"  spacing: min {min(gaps):.1f} s, median {statistics.median(gaps):.1f} s, "
            f"max {max(gaps):.1f} s"
        )
    if lines:
        print(f"  last line: {lines[-1][1].strip()}")
    return 0 if child.returncode == 0 and repeats == 0 else 1


if __name__ == "__main__":
    sys.exit(main())

"""``python -m taguru_eval demo [--out DIR] [--runs N]``: the bundled demo's command line."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

from taguru_eval._base.extras import load_extra
from taguru_eval.errors import EXIT_OK, UsageError

DEMO_HELP = """\
usage: python -m taguru_eval demo [--out DIR] [--runs N]

Starts the bundled reference server on an ephemeral loopback port with the
demo corpus (data/sake), evaluates its eval.jsonl with its must-refuse file
(data/sake/must_refuse.jsonl) against its thresholds.json, writes
DIR/evaluation.json and the run into DIR/runs/ (Parquet), prints a summary
table of the metrics (abstention.* and answerability.* included), then the
must-refuse verdicts under each rule: the default 'semantic' (the server as
shipped has no vector lane, so its passage probes are undetermined), 'any',
and 'semantic' again on a second server with the opt-in toy vector lane
(DIR/must-refuse-*.json), and stops the servers. DIR defaults to ./demo-out.

--runs N performs N runs and, between runs, changes the server's corpus through
its write API (adds, edits, removes paragraphs and associations), so the run
store holds a history whose revisions and metrics really move. Each run's
artifact is DIR/evaluation-<i>.json; the last one is also DIR/evaluation.json.
The exit code is 0 when every run completed (gate verdicts are printed), 1 if
one could not complete.
"""


def _parse_runs(value: str) -> int:
    if not value.isdigit() or int(value) < 1:
        raise UsageError("demo: --runs needs a positive integer")
    return int(value)


def main(argv: Sequence[str]) -> int:
    """``python -m taguru_eval demo [--out DIR] [--runs N]``: serve data/sake, evaluate it."""
    out_dir = Path("demo-out")
    runs = 1
    args = list(argv)
    while args:
        arg = args.pop(0)
        if arg in ("--help", "-h"):
            sys.stdout.write(DEMO_HELP)
            return EXIT_OK
        if arg in ("--out", "--runs") and not args:
            raise UsageError(
                "demo: --out needs a directory" if arg == "--out" else "demo: --runs needs a value"
            )
        if arg == "--out":
            out_dir = Path(args.pop(0))
            continue
        if arg == "--runs":
            runs = _parse_runs(args.pop(0))
            continue
        raise UsageError(f"demo: unexpected argument '{arg}'")
    load_extra("server")
    from taguru_eval.demo.run import run_demo, run_history

    return run_history(out_dir, runs) if runs > 1 else run_demo(out_dir)

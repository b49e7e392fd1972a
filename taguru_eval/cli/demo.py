"""``python -m taguru_eval demo``: the demo's command line (one run, N runs, or a mode pair)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final, TextIO

from taguru_eval._base.extras import load_extra
from taguru_eval.cli.flags import run_subcommand
from taguru_eval.errors import UsageError
from taguru_eval.options import parse_positive, resolve_budget

DEMO_HELP = """\
usage: python -m taguru_eval demo [--out DIR] [--runs N]
       python -m taguru_eval demo --assembly [--out DIR] [--max-items N]
                                  [--max-bytes N] [--max-tokens N]

Starts the bundled reference server on an ephemeral loopback port with the
demo corpus (data/sake), evaluates its eval.jsonl with its must-refuse file
(data/sake/must_refuse.jsonl) under --refusal-rule any against its
thresholds.json — the first lines show questions abstaining and surfacing, and
the must-refuse gate failing on the surfaced ones — writes DIR/evaluation.json
and the run into DIR/runs/ (Parquet), prints a summary table of the metrics
(abstention.* and answerability.* included), then the must-refuse verdicts
under each rule: 'any', the default 'semantic' (the server as shipped has no
vector lane, so its passage probes are undetermined), and 'semantic' again on
a second server with the opt-in toy vector lane (DIR/must-refuse-*.json, both
stored in DIR/runs/ too, so every notebook has runs to read), takes the
handbook's golden CSV through import-golden to a gated run with --answers, and
stops the servers. DIR defaults to ./demo-out. The exit code is 0 when every
run completed: the gates' verdicts (FAIL included) are what the demo shows.

--runs N performs N runs and, between runs, changes the server's corpus through
its write API (adds, edits, removes paragraphs and associations), so the run
store holds a history whose revisions and metrics really move. Each run's
artifact is DIR/evaluation-<i>.json; the last one is also DIR/evaluation.json.
The exit code is 0 when every run completed (gate verdicts are printed), 1 if
one could not complete.

--assembly runs the same cases twice at one budget, first with the baseline
passage lane (search hits truncated client-side), then with --assembly (the
server's evidence package), writes DIR/evaluation-baseline.json,
DIR/evaluation-assembly.json and DIR/changes.jsonl (compare of the two), and
prints every aggregate metric side by side. The budget is --max-items,
--max-bytes and --max-tokens as in run mode; without any of them it is
max_items 40, max_bytes 65536, max_tokens 1000. The exit code is 0 when both
runs completed.
"""

_BUDGET_FLAGS: Final = ("--max-items", "--max-bytes", "--max-tokens")


def _parse_runs(value: str) -> int:
    runs = parse_positive(value)
    if runs is None:
        raise UsageError("demo: --runs needs a positive integer")
    return runs


@dataclass(frozen=True)
class DemoArgs:
    """The parsed command line."""

    out_dir: Path = Path("demo-out")
    runs: int = 1
    assembly: bool = False
    budget: Mapping[str, int] = field(default_factory=dict)


def parse_args(argv: Sequence[str]) -> DemoArgs | None:
    """Parse the command line left to right; ``None`` means help."""
    out_dir = Path("demo-out")
    runs = 1
    assembly = False
    budget: dict[str, int] = {}
    args = list(argv)
    while args:
        arg = args.pop(0)
        if arg in ("--help", "-h"):
            return None
        if arg == "--assembly":
            assembly = True
            continue
        if arg in _BUDGET_FLAGS:
            value = parse_positive(args.pop(0)) if args else None
            if value is None:
                raise UsageError(f"demo: {arg} needs a positive integer")
            budget[arg] = value
            continue
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
    if budget and not assembly:
        raise UsageError(f"demo: {next(iter(budget))} requires --assembly")
    if assembly and runs > 1:
        raise UsageError("demo: --assembly and --runs cannot be combined")
    return DemoArgs(out_dir, runs, assembly, budget)


def _demo(args: DemoArgs, out: TextIO, err: TextIO) -> int:
    load_extra("server")
    from taguru_eval.demo.run import PAIR_BUDGET, run_assembly_pair, run_demo, run_history

    if args.assembly:
        budget = args.budget
        limits = (
            resolve_budget(*(budget.get(flag) for flag in _BUDGET_FLAGS)) if budget else PAIR_BUDGET
        )
        return run_assembly_pair(args.out_dir, limits)
    return run_history(args.out_dir, args.runs) if args.runs > 1 else run_demo(args.out_dir)


def main(argv: Sequence[str], *, stdout: TextIO | None = None, stderr: TextIO | None = None) -> int:
    """``python -m taguru_eval demo``: serve data/sake, evaluate it (once, N times, or in pair).

    A usage error points at the demo's own help, as every project subcommand's
    does (run mode and compare keep taguru's ``taguru evaluate --help``).
    """
    return run_subcommand("demo", argv, parse_args, _demo, DEMO_HELP, stdout=stdout, stderr=stderr)

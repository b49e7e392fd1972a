"""``python -m taguru_eval compare BASE HEAD [--out FILE]`` (GATE_AND_COMPARE.md §6.11).

Plus the project's opt-in significance flags: ``--significance`` adds the paired
tests of :mod:`taguru_eval.compare.significance` after taguru's summary lines and
as a ``significance`` header member of changes.jsonl; ``--fail-on-regression``
(which implies it) exits 3 when a metric regressed significantly. Without them,
stdout, changes.jsonl and the exit code are exactly taguru's.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, TextIO

from taguru_eval._base.text import one_line, parse_decimal
from taguru_eval.cli.flags import scan_flags
from taguru_eval.compare import compare
from taguru_eval.compare.report import write_atomically
from taguru_eval.compare.significance import (
    DEFAULT_ALPHA,
    DEFAULT_RESAMPLES,
    DEFAULT_SEED,
    MAX_RESAMPLES,
    MAX_SEED,
    Significance,
    significance,
)
from taguru_eval.errors import (
    EXIT_GATE,
    EXIT_INPUT,
    EXIT_OK,
    EXIT_RUN_FAILED,
    PREFIX,
    USAGE_SUFFIX,
    InputError,
    UsageError,
    os_error_text,
)
from taguru_eval.inputs.outputs import refuse_overlaps

DEFAULT_OUT: Final = "changes.jsonl"

HELP: Final = """\
usage: python -m taguru_eval compare BASE.json HEAD.json [--out FILE]
           [--significance] [--fail-on-regression] [--alpha A]
           [--resamples N] [--seed N]

Compare two evaluation runs case by case (a full join on case_id) and write
changes.jsonl: one header line (counts, both runs' identities, aggregate metric
sides and deltas, warnings), then one line per improved, regressed, added or
removed case. Unchanged cases get no line. A case is compared on nine
per-case metrics (recall.recall_at_k, recall.mrr, recall.ndcg,
coverage.concepts, coverage.labels, coverage.associations, citations.recall,
citations.locator_validity, diversity.sources; latency is excluded): a change
beyond 1e-9 either way counts, and any regressed metric makes the case
regressed. Mismatched context, corpus revision, thresholds identity, stamp or
budget are warned about on stderr and in the header, never refused.

arguments:
  BASE.json      the earlier run: an evaluation.json (written by taguru_eval or
                 by taguru's own evaluate) or a stored run directory
                 (runs/context=<ctx>/run=<id>/, read through its Parquet tables)
  HEAD.json      the later run, same forms
  --out FILE     where to write changes.jsonl (default: changes.jsonl); the
                 file is replaced atomically, its directory must exist
  --significance paired tests per compared metric over the cases matched on
                 both sides: mean difference, bootstrap confidence interval
                 (1 - alpha) and sign-flip p-value; printed after the summary
                 and added to the changes.jsonl header as "significance"
  --fail-on-regression
                 implies --significance; exit 3 when a metric regressed
                 significantly (p < alpha in its worse direction)
  --alpha A      significance level, 0 < A < 1 (default 0.05)
  --resamples N  bootstrap and sign-flip resamples, 1..1000000 (default 10000)
  --seed N       random seed, 0..2^64-1; the same seed gives the same result
                 (default 0)
  -h, --help     show this help and exit

exit codes:
  0  comparison completed and changes.jsonl written, whatever it found
     (regressions do not change the exit code; gate with --thresholds, or
     with --fail-on-regression)
  1  changes.jsonl could not be serialized or written
  2  usage error, unreadable input, malformed evaluation.json, or a
     taguru_evaluation stamp outside the supported range
  3  --fail-on-regression and a metric regressed significantly
     (changes.jsonl is written)
"""


@dataclass(frozen=True)
class CompareArgs:
    """The parsed command line."""

    base: str
    head: str
    out: str = DEFAULT_OUT
    significance: bool = False
    fail_on_regression: bool = False
    alpha: float = DEFAULT_ALPHA
    resamples: int = DEFAULT_RESAMPLES
    seed: int = DEFAULT_SEED

    @property
    def tests(self) -> bool:
        """Whether the significance tests run (asked for, or implied)."""
        return self.significance or self.fail_on_regression


# Value-taking flags: flag -> message when no value follows.
_VALUE_FLAGS: Final = {
    "--out": "--out needs a file path",
    "--alpha": "--alpha needs a number between 0 and 1",
    "--resamples": "--resamples needs a positive integer",
    "--seed": "--seed needs a non-negative integer",
}

_SWITCHES: Final = ("--significance", "--fail-on-regression")

_TEST_SETTINGS: Final = ("--alpha", "--resamples", "--seed")


def parse_args(argv: Sequence[str]) -> CompareArgs | None:
    """Parse compare's arguments left to right (§6.1); ``None`` means help.

    Raises :class:`UsageError` with the message body (no prefix or suffix).
    """
    found = scan_flags(argv, _VALUE_FLAGS, _SWITCHES, "evaluate compare")
    if found is None:
        return None
    positionals, values, switches = found.positionals, found.values, found.switches
    if len(positionals) != 2:
        raise UsageError(
            "evaluate compare takes exactly two positional arguments, BASE.json and "
            f"HEAD.json (got {len(positionals)})"
        )
    refuse_overlaps(
        {"BASE": positionals[0], "HEAD": positionals[1]},
        {"--out": values.get("--out", DEFAULT_OUT)},
    )
    settings = [flag for flag in _TEST_SETTINGS if flag in values]
    if settings and not switches:
        raise UsageError(f"{settings[0]} requires --significance or --fail-on-regression")
    return CompareArgs(
        positionals[0],
        positionals[1],
        values.get("--out", DEFAULT_OUT),
        significance="--significance" in switches,
        fail_on_regression="--fail-on-regression" in switches,
        alpha=_alpha(values.get("--alpha")),
        resamples=_count(
            "--resamples", values.get("--resamples"), DEFAULT_RESAMPLES, 1, MAX_RESAMPLES
        ),
        seed=_count("--seed", values.get("--seed"), DEFAULT_SEED, 0, MAX_SEED),
    )


def _alpha(text: str | None) -> float:
    if text is None:
        return DEFAULT_ALPHA
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0.0 < value < 1.0:  # NaN fails too
        raise UsageError(_VALUE_FLAGS["--alpha"])
    return value


def _count(flag: str, text: str | None, default: int, minimum: int, maximum: int) -> int:
    if text is None:
        return default
    if not (text.isascii() and text.isdigit()):
        raise UsageError(_VALUE_FLAGS[flag])
    value = parse_decimal(text, maximum)
    if value is None:
        raise UsageError(f"{_VALUE_FLAGS[flag]} of at most {maximum}")
    if value < minimum:
        raise UsageError(_VALUE_FLAGS[flag])
    return value


def main(argv: Sequence[str], *, stdout: TextIO | None = None, stderr: TextIO | None = None) -> int:
    """``python -m taguru_eval compare …``: returns the exit code (§6.11)."""
    out_stream = sys.stdout if stdout is None else stdout
    err_stream = sys.stderr if stderr is None else stderr
    try:
        args = parse_args(argv)
    except UsageError as exc:
        err_stream.write(f"{PREFIX}{exc.message}{USAGE_SUFFIX}\n")
        return EXIT_INPUT
    if args is None:
        out_stream.write(HELP)
        return EXIT_OK
    try:
        comparison = compare(args.base, args.head)
    except InputError as exc:
        err_stream.write(f"{PREFIX}{exc.message}\n")
        return EXIT_INPUT
    # Warnings go out before the write, so they show even if writing fails.
    for warning in comparison.warnings:
        err_stream.write(f"{PREFIX}{one_line(warning)}\n")
    if comparison.abstention is not None:
        for warning in comparison.abstention.warnings:
            err_stream.write(f"{PREFIX}{one_line(f'abstention: {warning}')}\n")
    err_stream.flush()
    tested: Significance | None = None
    if args.tests:
        tested = significance(
            comparison, resamples=args.resamples, seed=args.seed, alpha=args.alpha
        )
    extra = None if tested is None else {"significance": tested.header_block()}
    try:
        text = comparison.changes_jsonl(extra=extra)
    except (TypeError, ValueError) as exc:
        err_stream.write(f"{PREFIX}serializing changes.jsonl: {exc}\n")
        return EXIT_RUN_FAILED
    try:
        write_atomically(args.out, text)
    except OSError as exc:
        err_stream.write(f"{PREFIX}writing {args.out}: {os_error_text(exc)}\n")
        return EXIT_RUN_FAILED
    out_stream.write(comparison.summary(args.out))
    if tested is None:
        return EXIT_OK
    out_stream.write("".join(f"{line}\n" for line in tested.lines()))
    regressed = tested.regressed().get_column("metric").to_list()
    if args.fail_on_regression and regressed:
        err_stream.write(
            f"{PREFIX}{len(regressed)} metric(s) regressed significantly "
            f"(alpha {args.alpha:g}): {', '.join(regressed)}\n"
        )
        return EXIT_GATE
    return EXIT_OK

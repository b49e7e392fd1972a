"""``python -m taguru_eval compare BASE HEAD [--out FILE]`` (GATE_AND_COMPARE.md §6.11)."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, TextIO

from taguru_eval.compare import compare
from taguru_eval.compare.report import write_atomically
from taguru_eval.errors import (
    EXIT_INPUT,
    EXIT_OK,
    EXIT_RUN_FAILED,
    PREFIX,
    USAGE_SUFFIX,
    InputError,
    UsageError,
    os_error_text,
)

DEFAULT_OUT: Final = "changes.jsonl"

HELP: Final = """\
usage: python -m taguru_eval compare BASE.json HEAD.json [--out FILE]

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
  -h, --help     show this help and exit

exit codes:
  0  comparison completed and changes.jsonl written, whatever it found
     (regressions do not change the exit code; gate with --thresholds)
  1  changes.jsonl could not be serialized or written
  2  usage error, unreadable input, malformed evaluation.json, or a
     taguru_evaluation stamp outside the supported range
"""


@dataclass(frozen=True)
class CompareArgs:
    """The parsed command line."""

    base: str
    head: str
    out: str = DEFAULT_OUT


def parse_args(argv: Sequence[str]) -> CompareArgs | None:
    """Parse compare's arguments left to right (§6.1); ``None`` means help.

    Raises :class:`UsageError` with the message body (no prefix or suffix).
    """
    positionals: list[str] = []
    out: str | None = None
    index = 0
    while index < len(argv):
        arg = argv[index]
        if arg in ("--help", "-h"):
            return None
        if arg == "--out":
            if out is not None:
                raise UsageError("--out given twice")
            if index + 1 >= len(argv):
                raise UsageError("--out needs a file path")
            out = argv[index + 1]  # taken verbatim, even when it starts with --
            index += 2
            continue
        if arg.startswith("--"):
            raise UsageError(f"unknown flag '{arg}' for evaluate compare")
        positionals.append(arg)
        index += 1
    if len(positionals) != 2:
        raise UsageError(
            "evaluate compare takes exactly two positional arguments, BASE.json and "
            f"HEAD.json (got {len(positionals)})"
        )
    return CompareArgs(positionals[0], positionals[1], DEFAULT_OUT if out is None else out)


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
        err_stream.write(f"{PREFIX}{warning}\n")
    if comparison.abstention is not None:
        for warning in comparison.abstention.warnings:
            err_stream.write(f"{PREFIX}abstention: {warning}\n")
    err_stream.flush()
    try:
        text = comparison.changes_jsonl()
    except (TypeError, ValueError) as exc:
        err_stream.write(f"{PREFIX}serializing changes.jsonl: {exc}\n")
        return EXIT_RUN_FAILED
    try:
        write_atomically(args.out, text)
    except OSError as exc:
        err_stream.write(f"{PREFIX}writing {args.out}: {os_error_text(exc)}\n")
        return EXIT_RUN_FAILED
    out_stream.write(comparison.summary(args.out))
    return EXIT_OK

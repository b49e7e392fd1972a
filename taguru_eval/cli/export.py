"""``python -m taguru_eval export RUN --trec DIR [--eval FILE]``: a run for IR tools.

Writes ``DIR/run.trec`` (the run's hits) and ``DIR/qrels.trec`` (the eval
set's graded expectations) through :mod:`taguru_eval.analyst.export`. RUN is a
stored run directory or an evaluation.json; the qrels come from ``--eval``,
else from the eval.jsonl the run recorded (``inputs.eval.path``) when that
file exists.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final, TextIO

from taguru_eval.analyst.export import trec_qrels, trec_run, wildcard_expectations
from taguru_eval.api import load_run
from taguru_eval.cli.flags import run_subcommand, scan_flags, write_reports
from taguru_eval.errors import (
    EXIT_OK,
    PREFIX,
    InputError,
    RunError,
    UsageError,
    os_error_text,
)
from taguru_eval.inputs.dataset import load_eval
from taguru_eval.inputs.outputs import refuse_overlaps

RUN_FILE: Final = "run.trec"
QRELS_FILE: Final = "qrels.trec"

HELP: Final = """\
usage: python -m taguru_eval export RUN --trec DIR [--eval FILE]

Export a run for IR tools (trec_eval, ir_measures, ranx): DIR/run.trec holds
one 'qid Q0 docno rank score tag' line per served hit (qid = case_id, docno =
source#paragraph, score = the rank order, tag = the run id) and
DIR/qrels.trec one 'qid 0 docno relevance' line per expected passage, with the
graded relevance eval.jsonl declares. An expected source without paragraphs
("any paragraph") names no passage and gets no qrels line (counted on stderr).
Identifiers have '%' and whitespace percent-encoded.

arguments:
  RUN          a stored run directory (runs/context=<ctx>/run=<id>/) or an
               evaluation.json
  --trec DIR   where to write run.trec and qrels.trec (created if missing;
               both files are replaced atomically, together or not at all)
  --eval FILE  the eval.jsonl the qrels come from (default: the file the run
               recorded as inputs.eval.path, when it exists)
  -h, --help   show this help and exit

exit codes:
  0  both files written
  1  a file could not be written
  2  usage error, unreadable run, or no readable eval set for the qrels
"""


@dataclass(frozen=True)
class ExportArgs:
    """The parsed command line."""

    run: str
    trec: str
    eval_path: str | None = None


_VALUE_FLAGS: Final = {"--trec": "--trec needs a directory", "--eval": "--eval needs a file path"}


def parse_args(argv: Sequence[str]) -> ExportArgs | None:
    """Left to right; ``None`` means help. Raises :class:`UsageError`."""
    found = scan_flags(argv, _VALUE_FLAGS, (), "export")
    if found is None:
        return None
    positionals, values = found.positionals, found.values
    if len(positionals) != 1:
        raise UsageError(f"export takes exactly one RUN (got {len(positionals)})")
    if "--trec" not in values:
        raise UsageError("--trec DIR is required")
    if not values["--trec"]:
        raise UsageError("--trec needs a directory, not an empty one")
    written = {name: os.path.join(values["--trec"], name) for name in (RUN_FILE, QRELS_FILE)}
    refuse_overlaps({"RUN": positionals[0], "--eval": values.get("--eval")}, written)
    return ExportArgs(positionals[0], values["--trec"], values.get("--eval"))


def _eval_source(args: ExportArgs, recorded: object) -> str:
    if args.eval_path is not None:
        return args.eval_path
    if isinstance(recorded, str) and recorded and Path(recorded).is_file():
        return recorded
    shown = f"'{recorded}'" if isinstance(recorded, str) and recorded else "none"
    raise InputError(
        f"no eval set for the qrels: pass --eval FILE (the run recorded inputs.eval.path "
        f"{shown}, which is not a readable file here)"
    )


def export(args: ExportArgs, out: TextIO, err: TextIO) -> int:
    """Load the run and the eval set, then write both files."""
    run = load_run(args.run)
    inputs = run.doc.get("inputs") or {}
    recorded = (inputs.get("eval") or {}).get("path") if isinstance(inputs, dict) else None
    eval_path = _eval_source(args, recorded)
    eval_set = load_eval(eval_path)
    directory = Path(args.trec)
    if directory.exists() and not directory.is_dir():
        raise UsageError(f"--trec {args.trec} is a file; it names the directory to write into")
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise RunError(f"creating {directory}: {os_error_text(exc)}") from None
    run_text = trec_run(run.tables.hits, run.run_id)
    qrels_text = trec_qrels(eval_set.expected)
    # Both or neither: a run file beside the qrels of another export misleads every tool.
    write_reports([(directory / RUN_FILE, run_text), (directory / QRELS_FILE, qrels_text)])
    wildcards = wildcard_expectations(eval_set.expected)
    if wildcards:
        err.write(
            f"{PREFIX}export: {wildcards} expected source(s) name no paragraph "
            "('any paragraph of this source'): no qrels line for them\n"
        )
    out.write(
        f"  wrote {os.path.join(args.trec, RUN_FILE)} ({run_text.count(chr(10))} hit(s))\n"
        f"  wrote {os.path.join(args.trec, QRELS_FILE)} "
        f"({qrels_text.count(chr(10))} judged passage(s) from {eval_path})\n"
    )
    return EXIT_OK


def main(argv: Sequence[str], *, stdout: TextIO | None = None, stderr: TextIO | None = None) -> int:
    """Command-line entry; returns the exit code."""
    return run_subcommand("export", argv, parse_args, export, HELP, stdout=stdout, stderr=stderr)

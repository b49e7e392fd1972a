"""``python -m taguru_eval export RUN --trec DIR [--eval FILE] [--wildcards MODE]``.

Writes ``DIR/run.trec`` (the run's hits) and ``DIR/qrels.trec`` (the eval
set's graded expectations) through :mod:`taguru_eval.analyst.export`. RUN is a
stored run directory or an evaluation.json; the qrels come from ``--eval``,
else from the eval.jsonl the run recorded (``inputs.eval.path``) when that
file exists. ``--wildcards taguru`` writes expectations as taguru credits them
(:func:`taguru_eval.analyst.export.taguru_frames`).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final, TextIO

from taguru_eval._base.text import one_line
from taguru_eval.analyst.export import (
    WILDCARD_MODES,
    WILDCARDS_DROP,
    WILDCARDS_TAGURU,
    eval_source,
    qrels_text,
    run_text,
    trec_frames,
    wildcard_expectations,
)
from taguru_eval.api import Run, load_run
from taguru_eval.cli.flags import run_subcommand, scan_flags, write_reports
from taguru_eval.errors import (
    EXIT_OK,
    PREFIX,
    RunError,
    UsageError,
    os_error_text,
)
from taguru_eval.inputs.dataset import EvalSet, load_eval
from taguru_eval.inputs.outputs import refuse_overlaps

RUN_FILE: Final = "run.trec"
QRELS_FILE: Final = "qrels.trec"

HELP: Final = """\
usage: python -m taguru_eval export RUN --trec DIR [--eval FILE]
                        [--wildcards drop|taguru]

Export a run for IR tools (trec_eval, ir_measures, ranx): DIR/run.trec holds
one 'qid Q0 docno rank score tag' line per served hit (qid = case_id, docno =
source#paragraph, score = the rank order, tag = the run id) and
DIR/qrels.trec one 'qid 0 docno relevance' line per expected passage, with the
graded relevance eval.jsonl declares. An expected source without paragraphs
("any paragraph") names no passage and gets no qrels line (counted on stderr).
With --wildcards taguru, every judged expected source is one qrels document
(source#3, source#*, source#2+5) and the hit that first satisfies it is written
as that document, so the tools' uncut recall, recip_rank and ndcg are taguru's
recall@k, MRR and nDCG. Identifiers have '%' and whitespace percent-encoded.

arguments:
  RUN          a stored run directory (runs/context=<ctx>/run=<id>/) or an
               evaluation.json
  --trec DIR   where to write run.trec and qrels.trec (created if missing;
               both files are replaced atomically, together or not at all)
  --eval FILE  the eval.jsonl the qrels come from (default: the file the run
               recorded as inputs.eval.path, when it exists)
  --wildcards MODE
               drop (default): judged passages, as eval.jsonl lists them;
               taguru: judged expectations, credited once at their first
               satisfying hit, as taguru scores them (a hit that is the first
               to satisfy two or more is the one shape TREC cannot hold: the
               further ones get the next lines, and stderr counts the cases)
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
    wildcards: str = WILDCARDS_DROP


_VALUE_FLAGS: Final = {
    "--trec": "--trec needs a directory",
    "--eval": "--eval needs a file path",
    "--wildcards": "--wildcards needs drop or taguru",
}


def parse_wildcards(value: str | None, default: str = WILDCARDS_DROP) -> str:
    """``--wildcards``' value (``default`` when absent): ``drop`` or ``taguru``,
    anything else is a :class:`UsageError`."""
    if value is None:
        return default
    if value not in WILDCARD_MODES:
        raise UsageError(f"--wildcards must be drop or taguru, got '{value}'")
    return value


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
    wildcards = parse_wildcards(values.get("--wildcards"))
    refuse_overlaps({"RUN": positionals[0], "--eval": values.get("--eval")}, written)
    return ExportArgs(positionals[0], values["--trec"], values.get("--eval"), wildcards)


def run_and_eval(run_path: str, eval_path: str | None) -> tuple[Run, EvalSet, str]:
    """The run, its eval set (``eval_path``, else the one the run recorded) and that
    eval set's path. Raises :class:`InputError` when neither is readable."""
    run = load_run(run_path)
    source = eval_source(run.doc, eval_path)
    return run, load_eval(source), source


def export(args: ExportArgs, out: TextIO, err: TextIO) -> int:
    """Load the run and the eval set, then write both files."""
    run, eval_set, eval_path = run_and_eval(args.run, args.eval_path)
    directory = Path(args.trec)
    if directory.exists() and not directory.is_dir():
        raise UsageError(f"--trec {args.trec} is a file; it names the directory to write into")
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise RunError(f"creating {directory}: {os_error_text(exc)}") from None
    frames = trec_frames(eval_set.expected, run.tables, args.wildcards)
    run_file = run_text(frames.run, run.run_id)
    qrels_file = qrels_text(frames.qrels)
    # Both or neither: a run file beside the qrels of another export misleads every tool.
    write_reports([(directory / RUN_FILE, run_file), (directory / QRELS_FILE, qrels_file)])
    lines = frames.run.height
    if args.wildcards == WILDCARDS_TAGURU:
        if frames.shared_cases:
            # A case_id may hold control characters: the line is escaped as errors are.
            line = one_line(
                f"{PREFIX}export: {len(frames.shared_cases)} case(s) have a hit that is the "
                f"first to satisfy two or more expected sources (e.g. '{frames.shared_cases[0]}'):"
                " TREC holds one document per rank, so the further ones are written on the "
                "next lines; there nDCG is not taguru's (recall and MRR are)"
            )
            err.write(f"{line}\n")
        shown = f"{lines - frames.shared_lines} hit(s)"
        if frames.shared_lines:
            shown += f" and {frames.shared_lines} line(s) for the further expected sources"
        judged = "judged expectation(s)"
    else:
        wildcards = wildcard_expectations(eval_set.expected)
        if wildcards:
            err.write(
                f"{PREFIX}export: {wildcards} expected source(s) name no paragraph "
                "('any paragraph of this source'): no qrels line for them, so recall, MRR "
                "and nDCG read from these files differ from taguru's on the cases that expect "
                "one (--wildcards taguru writes them)\n"
            )
        shown = f"{lines} hit(s)"
        judged = "judged passage(s)"
    out.write(
        f"  wrote {os.path.join(args.trec, RUN_FILE)} ({shown})\n"
        f"  wrote {os.path.join(args.trec, QRELS_FILE)} "
        f"({frames.qrels.height} {judged} from {eval_path})\n"
    )
    return EXIT_OK


def main(argv: Sequence[str], *, stdout: TextIO | None = None, stderr: TextIO | None = None) -> int:
    """Command-line entry; returns the exit code."""
    return run_subcommand("export", argv, parse_args, export, HELP, stdout=stdout, stderr=stderr)

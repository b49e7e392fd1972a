"""``python -m taguru_eval import-golden FILE.csv``: a citenexus golden CSV in, honestly.

The logic is :mod:`taguru_eval.inputs.golden`; this module parses the flags,
optionally checks the mapped sources against a context (``--context``, like
taguru's own exit 2 on an unknown source), writes the eval.jsonl, the
answers file, the must-refuse file and the report atomically as one set (all
or none; no output may be the CSV or another output), and prints where every
row went.
"""

from __future__ import annotations

import os
import sys
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final, TextIO

from taguru_eval._base.signals import stoppable
from taguru_eval._base.text import one_line
from taguru_eval.cli.flags import run_subcommand, scan_flags, write_reports
from taguru_eval.errors import EXIT_OK, PREFIX, InputError, UsageError
from taguru_eval.inputs.config import effective_env, resolve_base_url, resolve_token, token_source
from taguru_eval.inputs.golden import (
    ANSWERS,
    EVAL,
    MUST_REFUSE,
    NEEDS_LABELS,
    SKIPPED,
    GoldenImport,
    GoldenOptions,
    import_golden,
    report_text,
)
from taguru_eval.inputs.outputs import refuse_overlaps
from taguru_eval.run import loop
from taguru_eval.run.http import TaguruClient
from taguru_eval.run.preflight import read_context, walk_sources

HELP: Final = """\
usage: python -m taguru_eval import-golden FILE.csv [--eval-out FILE]
           [--answers-out FILE] [--must-refuse-out FILE] [--report-out FILE]
           [--name N] [--id-prefix P] [--id-column C] [--expected-column C]
           [--blank-expected must-refuse|skip]
           [--sources-column C [--source-template T]]
           [--context NAME [--url URL] [--config FILE]]

Import a citenexus golden CSV. Rows with expect_decision=abstain become a
must-refuse file (note -> why). An answerable row with answer text
('expected', trimmed) becomes an eval.jsonl case plus an entry of the answers
file; a document-id column gives it a location too (--sources-column, each
'|'-separated id put through --source-template, e.g. 'corpus/{}.md'). An
answerable row with neither is listed in the report as needing labels.
Without an expect_decision column a blank 'expected' is ambiguous (citenexus
reads it as "any answer counts"): --blank-expected must-refuse or skip is
then required. The report (JSON) lists every row, every dropped column and
every warning.

options:
  --eval-out FILE         eval.jsonl to write (default: <csv stem>.eval.jsonl)
  --answers-out FILE      answers file (default: <csv stem>.answers.jsonl)
  --must-refuse-out FILE  must-refuse file (default: <csv stem>.must_refuse.jsonl)
  --report-out FILE       import report (default: <csv stem>.import-report.json)
  --name N                header name of the files (default: the csv stem)
  --id-prefix P           case_id prefix when no --id-column (default: golden)
  --id-column C           the column holding stable case ids
  --expected-column C     the column holding answer text (default: expected)
  --blank-expected WHAT   must-refuse or skip: what a blank 'expected' means
  --sources-column C      the document-id column mapped to expected_sources
  --source-template T     source id for a document id, '{}' is the id (default: {})
  --context NAME          check every mapped source against this context
  --url URL, --config F   where that context is served (as in run mode)
  -h, --help              print this help and exit

A file that would hold no case is not written (the report says so).
exit codes: 0 imported; 1 the server or a file could not be reached or
written; 2 usage error, unreadable or ambiguous CSV, unknown source
"""

_FILE_NAMES: Final = {EVAL: "eval.jsonl", MUST_REFUSE: "the must-refuse file"}

_VALUE_FLAGS: Final = {
    flag: f"{flag} needs a value"
    for flag in (
        "--eval-out",
        "--answers-out",
        "--must-refuse-out",
        "--report-out",
        "--name",
        "--id-prefix",
        "--id-column",
        "--expected-column",
        "--blank-expected",
        "--sources-column",
        "--source-template",
        "--context",
        "--url",
        "--config",
    )
}


@dataclass(frozen=True)
class ImportArgs:
    csv: str
    eval_out: str
    answers_out: str
    must_refuse_out: str
    report_out: str
    options: GoldenOptions
    context: str | None = None
    url: str | None = None
    config: str | None = None


def parse_args(argv: Sequence[str]) -> ImportArgs | None:
    """The command line; ``None`` means help. Raises :class:`UsageError`."""
    flags = scan_flags(argv, _VALUE_FLAGS, (), "import-golden")
    if flags is None:
        return None
    values, positionals = flags.values, flags.positionals
    if len(positionals) != 1:
        raise UsageError(f"import-golden takes one CSV file (got {len(positionals)})")
    blank = values.get("--blank-expected")
    if blank not in (None, "must-refuse", "skip"):
        raise UsageError("--blank-expected must be 'must-refuse' or 'skip'")
    if "--source-template" in values and "--sources-column" not in values:
        raise UsageError("--source-template requires --sources-column")
    for flag in ("--url", "--config"):
        if flag in values and "--context" not in values:
            raise UsageError(f"{flag} requires --context")
    csv_path = positionals[0]
    if not Path(csv_path).name:
        raise UsageError(f"import-golden takes a CSV file, not '{csv_path}'")
    stem = str(Path(csv_path).with_suffix(""))
    outputs = {
        "--eval-out": values.get("--eval-out", f"{stem}.eval.jsonl"),
        "--answers-out": values.get("--answers-out", f"{stem}.answers.jsonl"),
        "--must-refuse-out": values.get("--must-refuse-out", f"{stem}.must_refuse.jsonl"),
        "--report-out": values.get("--report-out", f"{stem}.import-report.json"),
    }
    refuse_overlaps({"the CSV": csv_path}, outputs)
    return ImportArgs(
        csv=csv_path,
        eval_out=outputs["--eval-out"],
        answers_out=outputs["--answers-out"],
        must_refuse_out=outputs["--must-refuse-out"],
        report_out=outputs["--report-out"],
        options=GoldenOptions(
            name=values.get("--name"),
            id_prefix=values.get("--id-prefix", "golden"),
            id_column=values.get("--id-column"),
            expected_column=values.get("--expected-column"),
            blank_expected="must-refuse" if blank == "must-refuse" else "skip" if blank else None,
            sources_column=values.get("--sources-column"),
            source_template=values.get("--source-template", "{}"),
        ),
        context=values.get("--context"),
        url=values.get("--url"),
        config=values.get("--config"),
    )


def check_sources(args: ImportArgs, imported: GoldenImport) -> None:
    """``--context``: every mapped source must be one the context carries (exit 2)."""
    if args.context is None or not imported.sources:
        return
    env = effective_env(args.config, os.environ, lambda line: print(line, file=sys.stderr))
    base_url = resolve_base_url(args.url, env)
    token = resolve_token(env)

    async def walk() -> frozenset[str]:
        context = args.context or ""
        async with TaguruClient(base_url, token) as client:
            # An unknown context is exit 2, as in run mode (with the same hints).
            await read_context(client, context, token_source(env, os.environ, args.config))
            return await walk_sources(client, context)

    carried = loop.run(stoppable(walk()))
    unknown = sorted(imported.sources - carried)
    if unknown:
        raise InputError(
            f"{args.csv}: {len(unknown)} mapped source(s) are not in context '{args.context}': "
            f"{', '.join(unknown)} (check --source-template)",
            path=args.csv,
        )


def run_import(args: ImportArgs, out: TextIO, err: TextIO) -> int:
    imported = import_golden(args.csv, args.options)
    check_sources(args, imported)
    report = imported.report
    files = {
        EVAL: (args.eval_out, imported.eval_text),
        ANSWERS: (args.answers_out, imported.answers_text),
        MUST_REFUSE: (args.must_refuse_out, imported.must_refuse_text),
    }
    report["written"] = {
        destination: None if text is None else path for destination, (path, text) in files.items()
    }
    outputs = [
        (path, text)
        for path, text in (*files.values(), (args.report_out, report_text(report)))
        if text is not None
    ]
    write_reports(outputs)  # the set or nothing: never a new eval.jsonl beside an old report
    counts = imported.counts
    lines = [
        f"import-golden: {report['rows']} row(s) from {args.csv} — {counts[EVAL]} to "
        f"eval.jsonl, {counts[ANSWERS]} to the answers file, {counts[MUST_REFUSE]} to the "
        f"must-refuse file, {counts[NEEDS_LABELS]} need labels, {counts[SKIPPED]} skipped"
    ]
    # Why the rows of each file went there, one line per reason (not per row).
    reasons = Counter(
        (entry["went"], entry["why"])
        for entry in report["rows_detail"]
        if entry["went"] in (EVAL, MUST_REFUSE)
    )
    for (went, why), count in reasons.items():
        lines.append(f"  {count} to {_FILE_NAMES[went]}: {why}")
    for destination, (path, _text) in files.items():
        if report["written"][destination] is not None:
            lines.append(f"  wrote {path}")
        elif destination == ANSWERS:
            lines.append(f"  no row has answer text: {path} not written")
        else:
            lines.append(f"  no {destination.replace('_', '-')} case: {path} not written")
    for entry in report["rows_detail"]:
        if entry["went"] in ("needs_labels", "skipped"):
            label = entry.get("case_id", f"row {entry['row']}")
            lines.append(f"  {entry['went'].replace('_', ' ')}: {label} — {entry['why']}")
    for dropped in report["columns"]["dropped"]:
        lines.append(f"  column '{dropped['column']}' not carried: {dropped['why']}")
    lines.append(f"  report: {args.report_out}")
    # Case ids, column names and the reasons quoting cells are the CSV's text: a
    # control character in one must not reach the terminal raw.
    out.write("".join(f"{one_line(line)}\n" for line in lines))
    for warning in report["warnings"]:
        err.write(f"{one_line(f'{PREFIX}import-golden: {warning}')}\n")
    return EXIT_OK


def main(argv: Sequence[str], *, stdout: TextIO | None = None, stderr: TextIO | None = None) -> int:
    """``python -m taguru_eval import-golden …``; returns the exit code."""
    return run_subcommand(
        "import-golden", argv, parse_args, run_import, HELP, stdout=stdout, stderr=stderr
    )

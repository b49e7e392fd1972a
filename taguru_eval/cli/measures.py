"""``python -m taguru_eval measures RUN MEASURE… [--eval FILE] [--wildcards MODE]
[--per-case FILE.parquet]``: ir_measures' measures over a run.

A thin shell over :func:`taguru_eval.measures`: the per-case
frame it returns is written with ``--per-case``, and
:func:`~taguru_eval.analyst.measures.aggregate` of it is the printed table.
"""

from __future__ import annotations

import io
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, TextIO

from taguru_eval._base.files import write_bytes_atomic
from taguru_eval.analyst.export import WILDCARDS_TAGURU
from taguru_eval.analyst.measures import aggregate, parse_measures
from taguru_eval.api import measures
from taguru_eval.cli.export import parse_wildcards
from taguru_eval.cli.flags import run_subcommand, scan_flags
from taguru_eval.errors import EXIT_OK, RunError, UsageError, os_error_text
from taguru_eval.inputs.outputs import refuse_overlaps

HELP: Final = """\
usage: python -m taguru_eval measures RUN MEASURE... [--eval FILE]
                        [--wildcards taguru|drop] [--per-case FILE.parquet]

Compute ir_measures measures (AP, P@5, R@100, nDCG@10, RR, SetR, ...) over a
run, by ir_measures itself, on the qrels and run 'export --trec' writes. Prints
one line per measure: its mean over the judged cases and their number n. With
the default --wildcards taguru, SetR, RR and nDCG (uncut) are taguru's own
recall@k, MRR and nDCG, except on a case where one hit is the first to satisfy
two or more expected sources (nDCG; see 'export --help'). Needs the 'ir' extra
(pip install 'taguru_eval[ir]').

arguments:
  RUN          a stored run directory (runs/context=<ctx>/run=<id>/) or an
               evaluation.json
  MEASURE      an ir_measures measure, as ir_measures.parse_measure reads it
               (quote one with parentheses: "nDCG(dcg='log2')@10")
  --eval FILE  the eval.jsonl the qrels come from (default: the file the run
               recorded as inputs.eval.path, when it exists)
  --wildcards MODE
               taguru (default): judged expectations, as taguru credits them;
               drop: judged passages, an entry without paragraphs left out
  --per-case FILE.parquet
               also write one row per case and measure (case_id, measure,
               value), atomically
  -h, --help   show this help and exit

exit codes:
  0  measures computed
  1  --per-case could not be written
  2  usage error, a measure ir_measures cannot take, unreadable run or eval
     set, or the 'ir' extra is not installed
"""


@dataclass(frozen=True)
class MeasuresArgs:
    """The parsed command line."""

    run: str
    names: tuple[str, ...]
    eval_path: str | None = None
    wildcards: str = WILDCARDS_TAGURU
    per_case: str | None = None


_VALUE_FLAGS: Final = {
    "--eval": "--eval needs a file path",
    "--wildcards": "--wildcards needs drop or taguru",
    "--per-case": "--per-case needs a file path",
}


def parse_args(argv: Sequence[str]) -> MeasuresArgs | None:
    """Left to right; ``None`` means help. Raises :class:`UsageError`."""
    found = scan_flags(argv, _VALUE_FLAGS, (), "measures")
    if found is None:
        return None
    positionals, values = found.positionals, found.values
    if not positionals:
        raise UsageError("measures takes a RUN and at least one MEASURE")
    if len(positionals) == 1:
        raise UsageError("measures needs at least one MEASURE after RUN (e.g. AP P@5 nDCG@10)")
    wildcards = parse_wildcards(values.get("--wildcards"), WILDCARDS_TAGURU)
    per_case = values.get("--per-case")
    refuse_overlaps(
        {"RUN": positionals[0], "--eval": values.get("--eval")}, {"--per-case": per_case}
    )
    return MeasuresArgs(
        positionals[0],
        tuple(positionals[1:]),
        values.get("--eval"),
        wildcards,
        per_case,
    )


def _number(value: float | None) -> str:
    if value is None or math.isnan(value):
        return "-"
    return f"{value:.4f}"


def table(rows: Sequence[tuple[str, float | None, int]]) -> str:
    """The printed table: ``measure  mean  n``, columns aligned."""
    cells = [("measure", "mean", "n"), *((m, _number(v), str(n)) for m, v, n in rows)]
    widths = [max(len(row[column]) for row in cells) for column in range(3)]
    return "".join(
        f"  {name:<{widths[0]}}  {mean:>{widths[1]}}  {n:>{widths[2]}}\n" for name, mean, n in cells
    )


def run_measures(args: MeasuresArgs, out: TextIO, err: TextIO) -> int:
    """Compute, print the table, write ``--per-case``."""
    # A bad measure name fails before the run is read.
    spelled = [str(measure) for measure in parse_measures(args.names)]
    per_case = measures(args.run, *args.names, eval_path=args.eval_path, wildcards=args.wildcards)
    if args.per_case is not None:
        buffer = io.BytesIO()
        per_case.write_parquet(buffer, compression="zstd")
        try:
            write_bytes_atomic(args.per_case, buffer.getvalue())
        except OSError as exc:
            raise RunError(f"writing {args.per_case}: {os_error_text(exc)}") from None
    means = {name: (mean, n) for name, mean, n in aggregate(per_case).iter_rows()}
    # Every measure asked for is a row, with n 0 when no case is judged.
    out.write(table([(name, *means.get(name, (None, 0))) for name in dict.fromkeys(spelled)]))
    if args.per_case is not None:
        out.write(f"  wrote {args.per_case} ({per_case.height} row(s))\n")
    return EXIT_OK


def main(argv: Sequence[str], *, stdout: TextIO | None = None, stderr: TextIO | None = None) -> int:
    """Command-line entry; returns the exit code."""
    return run_subcommand(
        "measures", argv, parse_args, run_measures, HELP, stdout=stdout, stderr=stderr
    )

"""``python -m taguru_eval report RUN [--base RUN] [-o report.html]``: one offline HTML file."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, TextIO

from taguru_eval._base.suggest import did_you_mean
from taguru_eval.cli.flags import run_subcommand, write_report
from taguru_eval.errors import EXIT_OK, UsageError
from taguru_eval.inputs.outputs import refuse_overlaps

DEFAULT_OUT: Final = "report.html"

HELP: Final = """\
usage: python -m taguru_eval report RUN [--base RUN] [-o FILE]
                                   [--thresholds FILE] [--store DIR]

Render one run as a self-contained HTML report (works offline: the chart
and table libraries are inlined): run summary, gate verdict, aggregate and
per-case metrics (histograms, the worst cases grouped by failure signature, a
capped sortable table linking the Parquet file with every row), misses, lane
cross-tab, latency, per-tag slices; with --base, the compare view (the
metrics that moved, improved and regressed cases with the metrics that drove
them); when RUN is a stored run (runs/context=<ctx>/run=<id>/), the metric
drift of its context over the stored runs up to it, each change of eval set,
mode, budget or thresholds file marked. Charts are aggregated first, so a
100,000-case run gives a page of about 2 MB.

arguments:
  RUN                an evaluation.json (taguru_eval's or taguru's own) or a
                     stored run directory
  --base RUN         compare against this earlier run (same forms)
  -o, --out FILE     where to write the report (default: report.html); the
                     file is replaced atomically
  --thresholds FILE  draw this thresholds file's aggregate bounds on the charts;
                     the file is checked as run mode checks it, against RUN's
                     case ids (and its --must-refuse metrics), with the same
                     messages
  --store DIR        the run store holding RUN's context history (default: the
                     store RUN sits in, if it is a stored run directory)
  -h, --help         show this help and exit

exit codes:
  0  report written
  1  the report could not be written
  2  usage error, unreadable or malformed evaluation.json or thresholds file
"""


@dataclass(frozen=True)
class ReportArgs:
    """The parsed command line."""

    run: str
    base: str | None = None
    out: str = DEFAULT_OUT
    thresholds: str | None = None
    store: str | None = None


def parse_args(argv: Sequence[str]) -> ReportArgs | None:
    """Parse the command line; ``None`` means help."""
    positionals: list[str] = []
    values: dict[str, str] = {}
    flags = {
        "--base": "base",
        "-o": "out",
        "--out": "out",
        "--thresholds": "thresholds",
        "--store": "store",
    }
    args = list(argv)
    i = 0
    while i < len(args):
        arg = args[i]
        if arg in ("-h", "--help"):
            return None
        name, eq, inline = arg.partition("=")
        if name in flags and (eq or arg in flags):
            if eq:
                value = inline
            elif i + 1 < len(args):
                value = args[i + 1]
                i += 1
            else:
                raise UsageError(f"{arg} needs a value")
            key = flags[name]
            if key in values:
                raise UsageError(f"{name} given twice")
            values[key] = value
        elif arg.startswith("-") and arg != "-":
            raise UsageError(
                f"unknown report flag '{arg}'", hint=did_you_mean(name, [*flags, "--help"])
            )
        else:
            positionals.append(arg)
        i += 1
    if len(positionals) != 1:
        raise UsageError("report takes exactly one RUN (an evaluation.json or a stored run)")
    inputs = {"RUN": positionals[0], "--base": values.get("base")}
    refuse_overlaps(
        {**inputs, "--thresholds": values.get("thresholds")}, {"-o": values.get("out", DEFAULT_OUT)}
    )
    return ReportArgs(run=positionals[0], **values)


def _report(args: ReportArgs, out: TextIO, err: TextIO) -> int:
    # Imported here: --help and a usage error need no Polars, Altair or httpx.
    from taguru_eval.analyst.report import build_report

    text = build_report(
        args.run, base=args.base, thresholds=args.thresholds, store=args.store, out=args.out
    )
    write_report(args.out, text)
    out.write(f"  wrote {args.out}\n")
    return EXIT_OK


def main(argv: Sequence[str], *, stdout: TextIO | None = None, stderr: TextIO | None = None) -> int:
    """Command-line entry; returns the exit code."""
    return run_subcommand("report", argv, parse_args, _report, HELP, stdout=stdout, stderr=stderr)

"""``python -m taguru_eval ingest evaluation.json [--store runs/]``: import a run."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final, TextIO

from taguru_eval._base.suggest import did_you_mean
from taguru_eval.analyst.ingest import ingest
from taguru_eval.cli.flags import run_subcommand
from taguru_eval.errors import EXIT_OK, UsageError
from taguru_eval.options import DEFAULT_STORE_DIR

HELP: Final = """\
usage: python -m taguru_eval ingest EVALUATION.json [--store DIR]

Import an evaluation.json (written by taguru_eval or by taguru's own evaluate)
into the Parquet run store, rebuilding the tables the artifact carries
(calls, case_lanes, hits, resolutions, probes, attributions, citation_checks,
cases, metrics). The run lands under
DIR/context=<inputs.context>/run=<generated_at>-<sha256 prefix>/; importing the
same file again changes nothing.

arguments:
  EVALUATION.json  the artifact to import
  --store DIR      the run store (default: runs)
  -h, --help       show this help and exit

exit codes:
  0  imported, or already in the store
  1  the store could not be written
  2  usage error, unreadable or malformed evaluation.json
"""


def parse_args(argv: Sequence[str]) -> tuple[str, str] | None:
    """``(file, store)`` from the command line; ``None`` means help."""
    file: str | None = None
    store = DEFAULT_STORE_DIR
    args = list(argv)
    i = 0
    while i < len(args):
        arg = args[i]
        if arg in ("-h", "--help"):
            return None
        if arg == "--store":
            if i + 1 >= len(args):
                raise UsageError("--store needs a directory")
            store = args[i + 1]
            i += 2
            continue
        if arg.startswith("--store="):
            store = arg.removeprefix("--store=")
        elif arg.startswith("-") and arg != "-":
            raise UsageError(
                f"unknown ingest flag '{arg}'", hint=did_you_mean(arg, ["--store", "--help"])
            )
        elif file is None:
            file = arg
        else:
            raise UsageError(f"unexpected argument '{arg}' (ingest takes one evaluation.json)")
        i += 1
    if file is None:
        raise UsageError("ingest needs an evaluation.json to import")
    if not store:
        raise UsageError("--store needs a directory, not an empty one")
    return file, store


def _ingest(parsed: tuple[str, str], out: TextIO, err: TextIO) -> int:
    file, store = parsed
    result = ingest(file, store)
    verb = "imported" if result.created else "already stored"
    out.write(f"  {verb}: context {result.context!r}, run {result.run_id}\n  at {result.path}\n")
    return EXIT_OK


def main(argv: Sequence[str], *, stdout: TextIO | None = None, stderr: TextIO | None = None) -> int:
    """Command-line entry; returns the exit code."""
    return run_subcommand("ingest", argv, parse_args, _ingest, HELP, stdout=stdout, stderr=stderr)

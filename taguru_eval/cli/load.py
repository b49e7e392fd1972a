"""``python -m taguru_eval load FOLDER``: put context folders into a taguru-compatible server."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final, TextIO

from taguru_eval.cli.flags import run_subcommand, scan_flags
from taguru_eval.errors import EXIT_OK, UsageError

HELP: Final = """\
usage: python -m taguru_eval load FOLDER [--url URL] [--config FILE] [--context NAME]
                                 [--replace] [--quiet]

Put a context folder — the layout 'serve DIR' reads: context.json, markdown
sources with their sections, tags and dates, associations.jsonl, aliases.json —
into a taguru server (or any server speaking its HTTP API) over the routes a
user would call: PUT /contexts/{name}, POST .../sources, .../associations and
.../aliases, batched under taguru's caps (1,000 sources, 10,000 associations,
10,000 alias pairs and the body cap a request). It returns once the context
reads back what was written, so a run that follows sees a settled revision.

arguments:
  FOLDER          one context folder (it holds a context.json,
                  associations.jsonl, aliases.json or a *.md of its own), or a
                  root whose sub-folders are the contexts, as 'serve DIR' reads
                  DIR; each context is named after its folder
  --url URL       the server (default: http:// + TAGURU_ADDR, 127.0.0.1:8248)
  --config FILE   KEY=VALUE env-file read as run mode reads it (default
                  TAGURU_CONFIG); its TAGURU_MAX_BODY_BYTES, as the server's,
                  sets the body budget (default 8 MiB; a 413 halves it)
  --context NAME  load a single folder under this name instead
  --replace       a context that already holds sources or a graph is deleted
                  and loaded afresh (DELETE /contexts/{name} needs an admin
                  key); without it, load refuses such a context and writes
                  nothing. An existing empty context is filled either way.
  --quiet         no progress display
  -h, --help      show this help and exit

The token is TAGURU_API_TOKEN (else the first entry of TAGURU_API_TOKENS), sent
only as a bearer header and never printed; it needs the write role. Proxies
come from HTTP_PROXY/HTTPS_PROXY/ALL_PROXY and NO_PROXY, as in run mode.

exit codes:
  0  every context loaded and read back
  1  the server could not be reached or refused a write (the file and line of
     a refused item are named; the line says what the context holds now)
  2  usage error, unreadable folder or file, bad URL or token, or a context
     that already holds data without --replace (nothing is written)
"""

_VALUE_FLAGS: Final = {
    "--url": "--url needs a value",
    "--config": "--config needs a file path",
    "--context": "--context needs a name",
}
_SWITCHES: Final = ("--replace", "--quiet")


@dataclass(frozen=True)
class LoadArgs:
    """The parsed command line."""

    folder: Path
    url: str | None = None
    config: str | None = None
    context: str | None = None
    replace: bool = False
    quiet: bool = False


def parse_args(argv: Sequence[str]) -> LoadArgs | None:
    """Parse the command line; ``None`` means help."""
    found = scan_flags(argv, _VALUE_FLAGS, _SWITCHES, "load")
    if found is None:
        return None
    if len(found.positionals) != 1:
        raise UsageError(
            f"load takes exactly one FOLDER (got {len(found.positionals)}): a context "
            "folder, or a root of them"
        )
    return LoadArgs(
        folder=Path(found.positionals[0]),
        url=found.values.get("--url"),
        config=found.values.get("--config"),
        context=found.values.get("--context"),
        replace="--replace" in found.switches,
        quiet="--quiet" in found.switches,
    )


def _load(args: LoadArgs, out: TextIO, err: TextIO) -> int:
    # The HTTP client and the data libraries are loaded once the flags are valid.
    from taguru_eval.populate.load import load_folders
    from taguru_eval.run.console import CaseProgress, Console

    progress = None if args.quiet else CaseProgress(err, unit="item")
    try:
        load_folders(
            args.folder,
            url=args.url,
            context=args.context,
            replace=args.replace,
            config=args.config,
            env=os.environ,
            console=Console(stdout=out, stderr=err),
            progress=progress,
        )
    finally:
        if progress is not None:
            progress.close()
    return EXIT_OK


def main(argv: Sequence[str], *, stdout: TextIO | None = None, stderr: TextIO | None = None) -> int:
    """Command-line entry; returns the exit code."""
    return run_subcommand("load", argv, parse_args, _load, HELP, stdout=stdout, stderr=stderr)

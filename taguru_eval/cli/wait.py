"""``python -m taguru_eval wait URL | --ready-file PATH [--timeout SECONDS]``."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path
from typing import Final

from taguru_eval.cli.flags import scan_long_flags
from taguru_eval.errors import EXIT_INPUT, EXIT_OK, InputError, TaguruEvalError, error_lines
from taguru_eval.run.wait import DEFAULT_TIMEOUT_S, wait_until_healthy

PROGRAM: Final = "taguru_eval wait"
USAGE: Final = (
    "usage: python -m taguru_eval wait URL [--timeout SECONDS]\n"
    "       python -m taguru_eval wait --ready-file PATH [--timeout SECONDS]"
)
MAX_TIMEOUT_S: Final = 86_400.0
"""A day: longer is a typo, not a wait."""
HELP: Final = f"""{USAGE}

Wait until a taguru server answers GET URL/health with 200, then print its URL
on stdout and exit 0: the race-free replacement for 'serve … & sleep 3' in CI.
With --ready-file, wait for the file 'serve --ready-file PATH' writes once it
answers, and take the URL from it (re-read every attempt).

  --timeout SECONDS  give up after this long (default 30; decimals allowed):
                     exit 1 with one line naming the URL and the last answer
  --ready-file PATH  the ready file of 'python -m taguru_eval serve'

Proxies come from HTTP_PROXY/HTTPS_PROXY/ALL_PROXY and NO_PROXY, as in run mode.
Exit codes: 0 ready, 1 timed out, 2 bad flag, URL or ready file.
"""

_SECONDS: Final = re.compile(r"[0-9]+(\.[0-9]+)?")


def _timeout(text: str) -> float:
    if not _SECONDS.fullmatch(text) or not 0 < float(text) <= MAX_TIMEOUT_S:
        raise InputError(f"--timeout must be a number of seconds in (0, 86400] (got {text!r})")
    return float(text)


def parse_args(argv: list[str]) -> tuple[str | None, Path | None, float] | None:
    """``(url, ready_file, timeout)``; None for ``--help``. Raises ``InputError``."""
    found = scan_long_flags(argv, ("--timeout", "--ready-file"), (), "wait")
    if found is None:
        return None
    values, positional = found.values, found.positionals
    if len(positional) > 1:
        raise InputError("wait takes one URL")
    ready = values.get("--ready-file")
    if ready == "":
        raise InputError("--ready-file must not be empty")
    if bool(positional) == (ready is not None):
        raise InputError("wait needs the server's URL or --ready-file PATH (one of them)")
    timeout = _timeout(values["--timeout"]) if "--timeout" in values else DEFAULT_TIMEOUT_S
    return (
        positional[0] if positional else None,
        None if ready is None else Path(ready),
        timeout,
    )


def main(argv: list[str]) -> int:
    """Run ``wait``: 0 once the server answers, 1 on timeout, 2 for bad input."""
    try:
        parsed = parse_args(argv)
    except InputError as error:
        sys.stderr.write(error_lines(error, f"{PROGRAM}: {error}"))
        return EXIT_INPUT
    if parsed is None:
        print(HELP, end="")
        return EXIT_OK
    url, ready_file, timeout = parsed
    try:
        ready_url = wait_until_healthy(url, ready_file=ready_file, timeout=timeout, env=os.environ)
    except TaguruEvalError as error:
        sys.stderr.write(error_lines(error, f"{PROGRAM}: {error}"))
        return error.exit_code
    print(ready_url, flush=True)
    return EXIT_OK

"""The project's own error types, each carrying the exit code the spec documents.

Every failure a user can cause (bad flag, bad file, bad server answer) is one of
these; the CLI prints ``str(error)`` as one stderr line and exits with
``error.exit_code``. Anything else reaching the CLI is a bug.

A message is made one line when the error is built (:func:`one_line` escapes
control characters a key, a case_id or a server's words may carry), so no
printing path can forget it; :class:`LinesError` is the one error that spans
several lines on purpose, each of them escaped on its own.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Final

from taguru_eval._base.text import one_line

PREFIX: Final = "taguru: evaluate: "
"""The start of every stderr line the project prints (GATE_AND_COMPARE.md §1.1)."""

USAGE_SUFFIX: Final = " — try 'taguru evaluate --help'"
"""What follows a usage error's message, pointing at the reference's help."""

EXIT_OK = 0
EXIT_RUN_FAILED = 1
EXIT_INPUT = 2
EXIT_GATE = 3
EXIT_INTERRUPTED = 130
"""Ctrl-C (SIGINT), 128 + 2 as a shell reports a process the signal ended."""
EXIT_TERMINATED = 143
"""SIGTERM (what a CI cancellation sends), 128 + 15 — what a shell reports for
taguru's own client, which leaves SIGTERM at its default action."""


class TaguruEvalError(Exception):
    """Base of every error the CLI renders as one line plus an exit code."""

    exit_code: int = EXIT_RUN_FAILED
    carries_prefix: bool = False
    """The message is the whole stderr text, prefix included (printed as it is)."""

    def __init__(self, message: str, *, exit_code: int | None = None) -> None:
        message = one_line(message)
        super().__init__(message)
        self.message = message
        if exit_code is not None:
            self.exit_code = exit_code

    def __str__(self) -> str:
        return self.message


class UsageError(TaguruEvalError):
    """A bad command line; printed with the ``— try '… --help'`` suffix."""

    exit_code = EXIT_INPUT


class InputError(TaguruEvalError):
    """A bad input file (eval.jsonl, thresholds, config, run artifact): exit 2.

    ``path``, ``line`` (1-based, physical) and ``field`` (a JSON path) locate the
    problem for programmatic callers; the message already names them.
    """

    exit_code = EXIT_INPUT

    def __init__(
        self,
        message: str,
        *,
        path: str | None = None,
        line: int | None = None,
        field: str | None = None,
    ) -> None:
        super().__init__(message)
        self.path = path
        self.line = line
        self.field = field


class LinesError(InputError):
    """Several complete stderr lines reported together (exit 2).

    Each line already carries its own ``taguru: evaluate: `` prefix and is
    escaped on its own, so the error stays exactly ``len(lines)`` lines.
    """

    carries_prefix = True

    def __init__(self, lines: Sequence[str]) -> None:
        super().__init__(lines[0] if lines else "")
        self.lines = tuple(one_line(line) for line in lines)
        self.message = "\n".join(self.lines)
        self.args = (self.message,)


def error_text(error: TaguruEvalError) -> str:
    """What stderr shows for ``error`` (a usage error's hint aside): its message
    under the ``taguru: evaluate:`` prefix, unless it carries its own."""
    return error.message if error.carries_prefix else f"{PREFIX}{error.message}"


class RunError(TaguruEvalError):
    """The run could not complete (server unreachable, artifact unwritable): exit 1."""

    exit_code = EXIT_RUN_FAILED


def os_error_text(exc: OSError) -> str:
    """An OS error worded the way the reference's Rust io::Error prints it.

    ``No such file or directory (os error 2)`` rather than Python's
    ``[Errno 2] No such file or directory: 'x'``, so messages match taguru's.
    """
    if exc.strerror and exc.errno is not None:
        return f"{exc.strerror} (os error {exc.errno})"
    return exc.strerror or str(exc)


class TaguruEvalWarning(UserWarning):
    """Base of every warning the library issues through :mod:`warnings`.

    A library caller sees it as any Python warning (filter it with
    ``warnings.simplefilter(..., TaguruEvalWarning)``, or turn it into an
    error); the command line prints each one as a single
    ``taguru: evaluate: warning: …`` line. The message is made one line when
    the warning is built, as an error's is.
    """

    def __init__(self, message: str) -> None:
        message = one_line(message)
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message


class DamagedRunWarning(TaguruEvalWarning):
    """A stored run was skipped because one of its files is damaged; the
    message names the file and what is wrong with it."""


class StoreWriteWarning(TaguruEvalWarning):
    """A finished run could not be kept in the run store; its artifact and its
    exit code (the gate's verdict) stand."""


class UnsentSettingWarning(TaguruEvalWarning):
    """``load`` met a folder setting no public route can carry (the reference
    server's own ``vector_lane``); the rest of the folder is loaded."""


def warn(warning: TaguruEvalWarning) -> None:
    """Issue ``warning`` on behalf of the library's caller."""
    warnings.warn(warning, stacklevel=3)

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

HINT_PREFIX: Final = "  hint: "
"""The start of a suggestion line. A suggestion never changes taguru's own line:
it follows it, on a line of its own starting with exactly these bytes (a
differential test against taguru drops such lines before comparing; no other
line may start this way)."""

HELP_COMMAND: Final = "python -m taguru_eval --help"
"""The help that explains run mode here (taguru's suffix names ``taguru evaluate``,
which this package does not install)."""

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
    hint: str | None = None
    """What to do about it, when the message alone does not say: printed after the
    message as its own ``  hint: …`` line (:data:`HINT_PREFIX`), and shown by a
    notebook's traceback as a note."""

    def __init__(
        self, message: str, *, exit_code: int | None = None, hint: str | None = None
    ) -> None:
        message = one_line(message)
        super().__init__(message)
        self.message = message
        if exit_code is not None:
            self.exit_code = exit_code
        if hint:
            self.add_hint(hint)

    def add_hint(self, hint: str) -> None:
        """Attach (or extend) the suggestion; one line, however it was written."""
        text = one_line(hint)
        self.hint = text if self.hint is None else f"{self.hint} {text}"
        self.add_note(f"hint: {text}")

    def __str__(self) -> str:
        return self.message

    def _render_traceback_(self) -> list[str]:
        """What IPython and Jupyter show instead of a traceback (IPython asks an
        exception for this): the one line and its hint, as the command line
        prints them — the error is the user's to fix, not the package's."""
        lines = [f"{type(self).__name__}: {self.message}"]
        return [*lines, f"hint: {self.hint}"] if self.hint else lines


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
        hint: str | None = None,
    ) -> None:
        super().__init__(message, hint=hint)
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
    """What stderr shows for ``error`` (a usage error's suffix and the hint aside):
    its message under the ``taguru: evaluate:`` prefix, unless it carries its own."""
    return error.message if error.carries_prefix else f"{PREFIX}{error.message}"


def hint_line(hint: str) -> str:
    """``hint`` as the line that follows an error (:data:`HINT_PREFIX`)."""
    return f"{HINT_PREFIX}{one_line(hint)}"


def with_help(hint: str | None, help_command: str) -> str:
    """A usage error's hint: its own suggestion, then where the help is."""
    pointer = f"see {help_command}"
    if not hint:
        return pointer
    stop = "" if hint.endswith((".", "?", "!")) else "."
    return f"{hint}{stop} {pointer[0].upper()}{pointer[1:]}"


def error_lines(error: TaguruEvalError, head: str | None = None) -> str:
    """What stderr shows for ``error``, newline-terminated: ``head`` (default
    :func:`error_text`), then the hint line when the error has a hint."""
    text = error_text(error) if head is None else head
    return f"{text}\n{hint_line(error.hint)}\n" if error.hint else f"{text}\n"


def usage_lines(error: TaguruEvalError, suffix: str, help_command: str | None) -> str:
    """A usage error as stderr shows it: the message with its ``— try …`` suffix,
    then the hint; with ``help_command`` (the suffix names help this package does
    not install) the hint always ends by naming the help that exists here."""
    hint = error.hint if help_command is None else with_help(error.hint, help_command)
    head = f"{PREFIX}{error.message}{suffix}"
    return f"{head}\n{hint_line(hint)}\n" if hint else f"{head}\n"


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


def temporary_write_error(directory: str, exc: OSError) -> RunError:
    """A temporary file (the lane values' spill file, a device output's copy) that
    cannot be written: a full or read-only temporary directory, a file-size limit."""
    return RunError(
        f"writing a temporary file in {directory}: {os_error_text(exc)}; "
        "set TMPDIR to a directory with room"
    )


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

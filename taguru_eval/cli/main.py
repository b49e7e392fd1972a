"""``python -m taguru_eval``: pick a mode; turn every project error into one line.

The first argument picks the mode: none is a usage error, ``--help``/``-h``
prints help, ``--version`` prints ``taguru_eval <version>``, anything
starting with ``--`` (the taguru form) or the word ``run`` is run mode, and
the project's subcommands are the table :data:`SUBCOMMANDS`. Any other word
is the reference's unknown-subcommand usage error.

Every stderr line keeps the reference's prefixes (GATE_AND_COMPARE.md §1.1):
usage errors are ``taguru: evaluate: {message} — try 'taguru evaluate --help'``
(exit 2), other project errors ``taguru: evaluate: {message}`` with their own
exit code, and messages that already carry a ``taguru: `` prefix (config-file
errors) are printed as they are. Library warnings
(:class:`~taguru_eval.errors.TaguruEvalWarning`) are printed as
``taguru: evaluate: warning: {message}`` lines.

SIGTERM — what a CI system sends when it cancels a job — is handled as Ctrl-C
is. Both are only recorded when they arrive (:mod:`taguru_eval._base.signals`):
a network phase's event loop is woken and its task cancelled, and everywhere
else the program raises :class:`Terminated` (a ``KeyboardInterrupt``) or
``KeyboardInterrupt`` at its next check (between stages, per chunk read or
written), so every cleanup an interrupt runs (temp files, the staging
directory, open connections) runs too, and never inside a finalizer. The
command then prints one line (``taguru: evaluate: terminated``) and exits 143,
the code a shell reports for taguru's own client, which SIGTERM ends by its
default action; Ctrl-C prints ``taguru: evaluate: interrupted`` and exits 130.
A signal that no check met before the command ended still decides its exit.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Final, NoReturn

from taguru_eval._base import signals
from taguru_eval._base.extras import MissingExtra
from taguru_eval._base.lazy import lazy_main
from taguru_eval._base.signals import Terminated
from taguru_eval._base.suggest import did_you_mean
from taguru_eval.contract import VERSION
from taguru_eval.errors import (
    EXIT_INPUT,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_TERMINATED,
    HELP_COMMAND,
    PREFIX,
    USAGE_SUFFIX,
    TaguruEvalError,
    UsageError,
    error_lines,
    usage_lines,
)

SUBCOMMANDS: Final[Mapping[str, Callable[[list[str]], int]]] = {
    "compare": lazy_main("taguru_eval.cli.compare"),
    "comment": lazy_main("taguru_eval.cli.comment"),
    "action-step": lazy_main("taguru_eval.cli.action_step"),
    "export": lazy_main("taguru_eval.cli.export"),
    "measures": lazy_main("taguru_eval.cli.measures"),
    "serve": lazy_main("taguru_eval.cli.serve"),
    "wait": lazy_main("taguru_eval.cli.wait"),
    "load": lazy_main("taguru_eval.cli.load"),
    "demo": lazy_main("taguru_eval.cli.demo"),
    "report": lazy_main("taguru_eval.cli.report"),
    "ingest": lazy_main("taguru_eval.cli.ingest"),
    "import-golden": lazy_main("taguru_eval.cli.import_golden"),
    "import-qrels": lazy_main("taguru_eval.cli.import_qrels"),
    "refusal-bands": lazy_main("taguru_eval.cli.refusal_bands"),
}
"""Subcommand word -> its ``main``, which takes the remaining arguments and
returns the exit code."""

MSG_NO_ARGS: Final = "expected --eval FILE --context NAME"
MSG_UNKNOWN_SUBCOMMAND: Final = (
    "unknown subcommand '{word}' — the default mode is selected by a leading flag, "
    "e.g. 'taguru evaluate --eval FILE --context NAME', or use the 'compare' subcommand"
)


def _error_output(error: TaguruEvalError) -> str:
    """The error's stderr lines: taguru's line as taguru prints it (a usage error
    with taguru's ``— try 'taguru evaluate --help'``), then a ``  hint: `` line
    naming the fix and, for a usage error, the help that exists here."""
    if isinstance(error, UsageError):
        return usage_lines(error, USAGE_SUFFIX, HELP_COMMAND)
    return error_lines(error)


def subcommand(word: str, args: Sequence[str]) -> int:
    """Run one of :data:`SUBCOMMANDS` with the remaining arguments.

    A subcommand whose optional extra is not installed ends with one line
    naming the extra (exit 2), never an import traceback.
    """
    try:
        return SUBCOMMANDS[word](list(args))
    except MissingExtra as missing:
        print(f"taguru: {word}: {missing}", file=sys.stderr)
        return EXIT_INPUT


def dispatch(args: Sequence[str]) -> int:
    """§2.1: choose the mode from the first argument."""
    if not args:
        raise UsageError(MSG_NO_ARGS)
    first = args[0]
    if first == "--version":
        sys.stdout.write(f"taguru_eval {VERSION}\n")
        return EXIT_OK
    # Run mode's module holds the help text and the flag parser; it is light
    # (the pipeline is imported once the flags are valid), but --version needs
    # none of it.
    from taguru_eval.cli.run import HELP, run_mode

    if first in ("--help", "-h"):
        sys.stdout.write(HELP)
        return EXIT_OK
    if first.startswith("--"):
        return run_mode(args)
    if first == "run":
        return run_mode(args[1:])
    if first in SUBCOMMANDS:
        return subcommand(first, args[1:])
    raise UsageError(
        MSG_UNKNOWN_SUBCOMMAND.format(word=first),
        hint=did_you_mean(first, ["run", *SUBCOMMANDS]),
    )


def main(argv: list[str] | None = None) -> int:
    """The command line; returns the exit code (0 ok, 1 run failed, 2 input, 3 gate,
    130 interrupted, 143 terminated). Called without ``argv`` it is the process's
    own command line: a stop signal after its last look still ends the process
    with its line and code (:func:`~taguru_eval._base.signals.deferring`)."""
    args = sys.argv[1:] if argv is None else list(argv)
    if args[:1] == ["--version"]:
        # The one answer that issues no warning and cannot be interrupted
        # half-way: it needs neither the warning printer nor the handler.
        return dispatch(args)
    from taguru_eval.cli.flags import printed_warnings

    with signals.deferring(final=_ended_by if argv is None else None):
        try:
            with printed_warnings(sys.stderr):
                code = dispatch(args)
            signals.check()
        except KeyboardInterrupt as stop:
            return _stopped(stop)
        except TaguruEvalError as error:
            sys.stderr.write(_error_output(error))
            code = error.exit_code
        late = signals.unraised()
        return code if late is None else _stopped(signals.stop_exception(late))


def _ended_by(signum: int) -> NoReturn:
    """A stop signal after the process's exit code was decided (the run is done and
    the interpreter is shutting down): its line, and the process ends with its code."""
    code = _stopped(signals.stop_exception(signum))
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def _stopped(stop: KeyboardInterrupt) -> int:
    """The one line and the exit code of a stop signal (or of Ctrl-C's exception)."""
    if isinstance(stop, Terminated):
        print(f"{PREFIX}terminated", file=sys.stderr)
        return EXIT_TERMINATED
    print(f"{PREFIX}interrupted", file=sys.stderr)
    return EXIT_INTERRUPTED

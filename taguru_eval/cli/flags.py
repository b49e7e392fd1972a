"""Shared pieces of the subcommands' command lines: the shell every project
subcommand runs in, how library warnings are printed, a left-to-right flag
scan and the one way a report file is written.

The scan keeps taguru's habits (GATE_AND_COMPARE.md §6.1): ``-h``/``--help``
anywhere means help, a value-taking flag takes the next argument verbatim (even
one starting with ``--``), a repeated flag is ``X given twice``, a missing value
is the flag's own ``X needs …`` message, an unknown ``--flag`` is refused and
every other word is a positional.
"""

from __future__ import annotations

import contextlib
import sys
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO, TypeVar

from taguru_eval._base.files import WriteFailed, write_all_atomic, write_bytes_atomic
from taguru_eval._base.suggest import did_you_mean
from taguru_eval.errors import (
    EXIT_OK,
    PREFIX,
    RunError,
    TaguruEvalError,
    TaguruEvalWarning,
    UsageError,
    error_lines,
    os_error_text,
    usage_lines,
)

Args = TypeVar("Args")


@contextlib.contextmanager
def printed_warnings(err: TextIO) -> Iterator[None]:
    """Inside: every warning the library issues (:class:`TaguruEvalWarning`) is
    printed to ``err`` at once as one ``taguru: evaluate: warning: …`` line,
    each time it is issued; other warnings keep Python's handling."""
    with warnings.catch_warnings():
        warnings.simplefilter("always", TaguruEvalWarning)
        shown = warnings.showwarning

        def show(
            message: Warning | str,
            category: type[Warning],
            filename: str,
            lineno: int,
            file: TextIO | None = None,
            line: str | None = None,
        ) -> None:
            if isinstance(message, TaguruEvalWarning):
                err.write(f"{PREFIX}warning: {message}\n")
                err.flush()
            else:
                shown(message, category, filename, lineno, file, line)

        warnings.showwarning = show
        yield


def run_subcommand(
    word: str,
    argv: Sequence[str],
    parse: Callable[[Sequence[str]], Args | None],
    act: Callable[[Args, TextIO, TextIO], int],
    help_text: str,
    *,
    stdout: TextIO | None = None,
    stderr: TextIO | None = None,
) -> int:
    """Parse ``argv`` (``None`` means help was asked for), then ``act``; a project
    error becomes its one stderr line and its exit code (a usage error points at
    ``python -m taguru_eval <word> --help``)."""
    out = stdout or sys.stdout
    err = stderr or sys.stderr
    try:
        args = parse(argv)
        if args is None:
            out.write(help_text)
            return EXIT_OK
        with printed_warnings(err):
            return act(args, out, err)
    except UsageError as exc:
        err.write(usage_lines(exc, f" — try 'python -m taguru_eval {word} --help'", None))
        return exc.exit_code
    except TaguruEvalError as exc:
        err.write(error_lines(exc))
        return exc.exit_code


@dataclass(frozen=True)
class Flags:
    """What one scan found."""

    positionals: list[str] = field(default_factory=list)
    values: dict[str, str] = field(default_factory=dict)
    switches: set[str] = field(default_factory=set)
    repeated: dict[str, list[str]] = field(default_factory=dict)
    """The values of each repeatable flag, in command-line order."""


def scan_flags(
    argv: Sequence[str],
    value_flags: Mapping[str, str],
    switches: Sequence[str],
    command: str,
    *,
    repeatable: Mapping[str, str] | None = None,
) -> Flags | None:
    """Scan ``argv``; ``None`` means help. ``value_flags`` maps a flag to its
    missing-value message; ``repeatable`` does the same for value flags that may
    be given more than once (collected in :attr:`Flags.repeated`); ``command``
    names the command in the unknown-flag message. Raises :class:`UsageError`."""
    found = Flags()
    many = repeatable or {}
    index = 0
    while index < len(argv):
        arg = argv[index]
        if arg in ("--help", "-h"):
            return None
        if arg in many:
            if index + 1 >= len(argv):
                raise UsageError(many[arg])
            found.repeated.setdefault(arg, []).append(argv[index + 1])
            index += 2
            continue
        if arg in value_flags:
            # taguru looks for the value first: a trailing flag needs its value
            # even when an earlier one was given.
            if index + 1 >= len(argv):
                raise UsageError(value_flags[arg])
            if arg in found.values:
                raise UsageError(f"{arg} given twice")
            found.values[arg] = argv[index + 1]
            index += 2
            continue
        if arg in switches:
            if arg in found.switches:
                raise UsageError(f"{arg} given twice")
            found.switches.add(arg)
            index += 1
            continue
        if arg.startswith("--"):
            known = [*value_flags, *switches, *many, "--help"]
            raise UsageError(f"unknown flag '{arg}' for {command}", hint=did_you_mean(arg, known))
        found.positionals.append(arg)
        index += 1
    return found


def write_reports(files: Sequence[tuple[str | Path, str]]) -> None:
    """Write a set of output files, all of them or none (:func:`write_all_atomic`);
    a failure is a :class:`RunError` (exit 1) naming the file."""
    try:
        write_all_atomic([(path, text.encode("utf-8")) for path, text in files])
    except WriteFailed as exc:
        raise RunError(f"writing {exc.path}: {os_error_text(exc.error)}") from None


def write_report(path: str | Path, text: str) -> None:
    """Write an output file atomically; a failure is a :class:`RunError` (exit 1)
    naming the path."""
    try:
        write_bytes_atomic(path, text.encode("utf-8"))
    except OSError as exc:
        raise RunError(f"writing {path}: {os_error_text(exc)}") from None

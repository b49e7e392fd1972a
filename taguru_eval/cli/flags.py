"""Shared pieces of the subcommands' command lines: the shell every project
subcommand runs in, how library warnings are printed, the one left-to-right flag
scan (run mode, every subcommand, ``serve`` and ``wait``) and the one way a
report file is written.

The scan keeps taguru's habits (GATE_AND_COMPARE.md §6.1): ``-h``/``--help``
anywhere means help, a value-taking flag takes the next argument verbatim (even
one starting with ``--``), a repeated flag is ``X given twice``, a missing value
is the flag's own ``X needs …`` message, an unknown ``--flag`` is refused and
every other word is a positional. ``serve`` and ``wait``, the project's own
commands, also take ``--flag=VALUE``.
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
    InputError,
    RunError,
    TaguruEvalError,
    TaguruEvalWarning,
    UsageError,
    error_lines,
    os_error_text,
    usage_lines,
)
from taguru_eval.options import Flag

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
    """Each value flag's text (an ``optional`` flag's, when one was given)."""
    parsed: dict[str, object] = field(default_factory=dict)
    """What a flag's :attr:`~Flag.scan` (or ``read``) made of its text."""
    switches: set[str] = field(default_factory=set)
    """The switches given (and the ``optional`` flags, with or without a value)."""
    repeated: dict[str, list[str]] = field(default_factory=dict)
    """The values of each repeatable flag, in command-line order."""


def scan(
    argv: Sequence[str],
    table: Mapping[str, Flag],
    command: str,
    *,
    positional: str | None = None,
    equals: bool = False,
    error: type[TaguruEvalError] = UsageError,
) -> Flags | None:
    """The one flag scan: ``argv`` left to right against ``table`` (flag -> its
    :class:`Flag`); ``None`` means help. ``command`` names the command in the
    unknown-flag message; ``positional``, when given, is the error for a
    positional word (else they are collected). ``equals`` also takes the
    ``--flag=VALUE`` spelling, as the project's own ``serve`` and ``wait`` do
    (taguru's command line does not). A problem raises ``error``."""
    found = Flags()
    index = 0
    while index < len(argv):
        arg = argv[index]
        if arg in ("--help", "-h"):
            return None
        following = argv[index + 1] if index + 1 < len(argv) else None
        step = 2
        spec = table.get(arg)
        if spec is None and equals and arg.startswith("--") and "=" in arg:
            arg, _, following = arg.partition("=")
            step = 1
            spec = table.get(arg)
            if spec is not None and spec.kind != "value":
                raise error(f"{arg} takes no value")
        if spec is None:
            if arg.startswith("--"):
                known = [*table, "--help"]
                raise error(f"unknown flag '{arg}' for {command}", hint=did_you_mean(arg, known))
            if positional is not None:
                raise error(positional)
            found.positionals.append(arg)
            index += 1
            continue
        if spec.kind == "repeatable":
            if following is None:
                raise error(spec.missing)
            found.repeated.setdefault(arg, []).append(following)
            index += step
            continue
        # taguru looks for a value first: a trailing flag needs its value even when
        # an earlier one was given (a count, and the project's own commands, check
        # for a repeat first).
        if spec.kind == "value" and following is None and not equals:
            raise error(spec.missing)
        if arg in found.values or arg in found.switches:
            raise error(f"{arg} given twice")
        if spec.kind in ("switch", "negated", "optional"):
            found.switches.add(arg)
            # An optional value is the next word unless that is a flag.
            if spec.kind != "optional" or following is None or following.startswith("-"):
                index += 1
                continue
        parse = spec.scan or spec.read
        value = following if following is None or parse is None else parse(following)
        if following is None or value is None:
            raise error(spec.missing)
        found.values[arg] = following
        if parse is not None:
            found.parsed[arg] = value
        index += step
    return found


def scan_long_flags(
    argv: Sequence[str], value_flags: Sequence[str], switches: Sequence[str], command: str
) -> Flags | None:
    """:func:`scan` for ``serve`` and ``wait``, the project's own commands: ``--flag
    VALUE`` or ``--flag=VALUE``, and a problem is an :class:`InputError` (exit 2)."""
    table = {
        **{name: Flag(name, missing=f"{name} needs a value") for name in value_flags},
        **{name: Flag(name, kind="switch") for name in switches},
    }
    return scan(argv, table, command, equals=True, error=InputError)


def scan_flags(
    argv: Sequence[str],
    value_flags: Mapping[str, str],
    switches: Sequence[str],
    command: str,
    *,
    repeatable: Mapping[str, str] | None = None,
) -> Flags | None:
    """:func:`scan` with a subcommand's flags: ``value_flags`` maps a flag to its
    missing-value message; ``repeatable`` does the same for value flags that may
    be given more than once (collected in :attr:`Flags.repeated`)."""
    table = {
        **{name: Flag(name, missing=missing) for name, missing in value_flags.items()},
        **{name: Flag(name, kind="switch") for name in switches},
        **{
            name: Flag(name, missing=missing, kind="repeatable")
            for name, missing in (repeatable or {}).items()
        },
    }
    return scan(argv, table, command)


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

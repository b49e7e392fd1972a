"""The flag scan of ``serve`` and ``wait``: ``--flag VALUE`` or ``--flag=VALUE``.

Unlike run mode's flags (taguru's own command line, :mod:`.flags`), these two
commands are the project's and take the ``=`` spelling too. A problem is an
:class:`~taguru_eval.errors.InputError` (exit 2) naming the flag. Kept apart
from :mod:`.flags` so that ``serve``'s start-up imports nothing more.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, field

from taguru_eval._base.suggest import did_you_mean
from taguru_eval.errors import InputError


@dataclass
class LongFlags:
    """What one scan found."""

    values: dict[str, str] = field(default_factory=dict)
    switches: set[str] = field(default_factory=set)
    positionals: list[str] = field(default_factory=list)


def scan_long_flags(
    argv: Sequence[str], value_flags: Collection[str], switches: Collection[str], command: str
) -> LongFlags | None:
    """Scan ``argv``; ``None`` means help (``-h``/``--help``)."""
    found = LongFlags()
    index = 0
    while index < len(argv):
        arg = argv[index]
        index += 1
        if arg in ("-h", "--help"):
            return None
        if arg in switches:
            if arg in found.switches:
                raise InputError(f"{arg} given twice")
            found.switches.add(arg)
        elif arg.startswith("--"):
            flag, eq, inline = arg.partition("=")
            if flag in switches:
                raise InputError(f"{flag} takes no value")
            if flag not in value_flags:
                raise InputError(
                    f"unknown flag '{flag}' for {command}",
                    hint=did_you_mean(flag, [*value_flags, *switches, "--help"]),
                )
            if flag in found.values:
                raise InputError(f"{flag} given twice")
            if eq:
                found.values[flag] = inline
            elif index < len(argv):
                found.values[flag] = argv[index]
                index += 1
            else:
                raise InputError(f"{flag} needs a value")
        else:
            found.positionals.append(arg)
    return found

"""The suggestion lines that follow an error (``  hint: …``), apart from taguru's lines.

A hint never changes the line taguru prints; it follows it on a line of its own
that starts with :data:`HINT`. Tests that hold a line to taguru's bytes compare
:func:`without_hints`; tests of the suggestion read :func:`hints`.
"""

from __future__ import annotations

HINT = "  hint: "


def without_hints(text: str) -> str:
    """``text`` without its hint lines: what taguru itself would have printed."""
    return "".join(line for line in text.splitlines(keepends=True) if not line.startswith(HINT))


def hints(text: str) -> list[str]:
    """The hint lines' text (after ``  hint: ``), in order."""
    return [line.removeprefix(HINT) for line in text.splitlines() if line.startswith(HINT)]

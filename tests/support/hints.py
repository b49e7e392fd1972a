"""The suggestion lines that follow an error (``  hint: …``), apart from taguru's lines.

A hint never changes the line taguru prints; it follows it on a line of its own
that starts with :data:`~support.differential.HINT` (declared once, beside the
differential suites that drop such lines). Tests that hold a line to taguru's
bytes compare :func:`without_hints`; tests of the suggestion read :func:`hints`.
"""

from __future__ import annotations

from support.differential import HINT, without_hints

__all__ = ["HINT", "hints", "without_hints"]


def hints(text: str) -> list[str]:
    """The hint lines' text (after ``  hint: ``), in order."""
    return [line.removeprefix(HINT) for line in text.splitlines() if line.startswith(HINT)]

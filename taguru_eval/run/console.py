"""Where run output goes (stdout, stderr) and the terminal progress bar."""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TextIO

Progress = Callable[[int, int], None]
"""Called with (cases done, cases total) after each case finishes."""


@dataclass
class Console:
    """Where run output goes (stdout summary, stderr diagnostics)."""

    stdout: TextIO = field(default_factory=lambda: sys.stdout)
    stderr: TextIO = field(default_factory=lambda: sys.stderr)

    def out(self, line: str) -> None:
        print(line, file=self.stdout, flush=True)

    def err(self, line: str) -> None:
        print(line, file=self.stderr, flush=True)


class ProgressBar:
    """A one-line progress bar on a terminal (never written to a pipe or file)."""

    WIDTH = 30

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream

    def __call__(self, done: int, total: int) -> None:
        filled = self.WIDTH if total == 0 else self.WIDTH * done // total
        bar = "#" * filled + "-" * (self.WIDTH - filled)
        end = "\n" if done >= total else ""
        self.stream.write(f"\r  [{bar}] {done}/{total} case(s){end}")
        self.stream.flush()


def terminal_progress(stream: TextIO) -> Progress | None:
    """A progress bar when ``stream`` is a terminal, else None."""
    isatty = getattr(stream, "isatty", None)
    return ProgressBar(stream) if callable(isatty) and isatty() else None

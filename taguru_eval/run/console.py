"""Where run output goes (stdout, stderr) and the cases' progress display.

Progress goes through tqdm (see the README's decisions): on a terminal a live
bar with the rate and the time left; anywhere else (a CI log, a pipe, a
notebook's stderr) nothing for the first :data:`LOG_INTERVAL_S` seconds, then
one plain line at most every :data:`LOG_INTERVAL_S` seconds, so a log shows a
long run moving without filling up. A run shorter than that prints nothing.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final, TextIO

from tqdm import tqdm

Progress = Callable[[int, int], None]
"""Called with (cases done, cases total) after each case finishes."""

LOG_INTERVAL_S: Final = 10.0
"""Seconds between two progress lines written to a non-terminal."""

LOG_FORMAT: Final = (
    "{n_fmt}/{total_fmt} case(s) ({percentage:.0f}%), {rate_fmt}, "
    "elapsed {elapsed}, left {remaining}"
)


@dataclass
class Console:
    """Where run output goes (stdout summary, stderr diagnostics)."""

    stdout: TextIO = field(default_factory=lambda: sys.stdout)
    stderr: TextIO = field(default_factory=lambda: sys.stderr)

    def out(self, line: str) -> None:
        print(line, file=self.stdout, flush=True)

    def err(self, line: str) -> None:
        print(line, file=self.stderr, flush=True)


class _Lines:
    """A file for tqdm that turns its carriage-return redraws into whole lines
    (indented by two spaces, tqdm's number padding squeezed out)."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream

    def write(self, text: str) -> None:
        words = text.replace("\r", "").split()
        if words:
            self.stream.write("  " + " ".join(words) + "\n")

    def flush(self) -> None:
        self.stream.flush()


def is_terminal(stream: TextIO) -> bool:
    """Whether ``stream`` is an interactive terminal."""
    isatty = getattr(stream, "isatty", None)
    return bool(callable(isatty) and isatty())


class CaseProgress:
    """A :data:`Progress` drawn by tqdm on ``stream``.

    ``terminal`` picks the display (default: whether ``stream`` is a
    terminal); ``interval`` is the log display's spacing in seconds.
    :meth:`close` ends the display (called by itself when the last case is done).
    """

    def __init__(
        self,
        stream: TextIO,
        *,
        terminal: bool | None = None,
        interval: float = LOG_INTERVAL_S,
    ) -> None:
        self.stream = stream
        self.terminal = is_terminal(stream) if terminal is None else terminal
        self.interval = interval
        self._bar: Any = None

    def _open(self, total: int) -> Any:
        if self.terminal:
            return tqdm(total=total, file=self.stream, unit="case", leave=True)
        return tqdm(
            total=total,
            file=_Lines(self.stream),
            bar_format=LOG_FORMAT,
            unit=" case",
            mininterval=self.interval,
            delay=self.interval,
            dynamic_ncols=False,
            ascii=True,
        )

    def __call__(self, done: int, total: int) -> None:
        if self._bar is None:
            self._bar = self._open(total)
        self._bar.update(done - self._bar.n)
        if done >= total:
            self.close()

    def close(self) -> None:
        """End the display (idempotent)."""
        if self._bar is not None:
            self._bar.close()
            self._bar = None


def case_progress(stream: TextIO, *, quiet: bool = False) -> CaseProgress | None:
    """The CLI's progress display on ``stream``, or ``None`` when ``quiet``."""
    return None if quiet else CaseProgress(stream)

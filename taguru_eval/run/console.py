"""Where run output goes (stdout, stderr) and the cases' progress display.

On a terminal the display is tqdm's live bar with the rate and the time left.
Anywhere else (a CI log, a pipe, a notebook's stderr) it is plain lines,
written by :class:`_LogLines` on an injectable clock (see docs/command-line.md's
Progress section):

* the lines are due every :data:`LOG_INTERVAL_S` seconds after the first case
  finished — ``start + 10 s``, ``start + 20 s``, … — and each is written by the
  first case to finish at or after its due time; a due time that passes with
  no case finished is skipped, never made up later, so the spacing stays even
  and two lines never bunch;
* no two lines show the same completed count;
* a line's rate (and the time left from it) is the rate since the previous
  line; the last line, once every case is done, is the whole run's average,
  labelled so;
* a run done before its first line is due prints nothing at all.
"""

from __future__ import annotations

import math
import os
import re
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, TextIO

from tqdm import tqdm

Progress = Callable[[int, int], None]
"""Called with (cases done, cases total) after each case finishes."""

Clock = Callable[[], float]
"""Seconds on a monotonic clock (``time.monotonic``; a test passes its own)."""

LOG_INTERVAL_S: Final = 10.0
"""Seconds between two progress lines written to a non-terminal."""


@dataclass
class Console:
    """Where run output goes (stdout summary, stderr diagnostics).

    ``color``: paint the verdicts of the summary (``FAIL`` red, ``PASS`` green);
    by default only when stdout is a terminal and ``NO_COLOR`` is not set
    (:func:`wants_color`). A log, a pipe or a notebook gets the bytes as they are."""

    stdout: TextIO = field(default_factory=lambda: sys.stdout)
    stderr: TextIO = field(default_factory=lambda: sys.stderr)
    color: bool | None = None

    def __post_init__(self) -> None:
        if self.color is None:
            self.color = wants_color(self.stdout)

    def out(self, line: str) -> None:
        print(paint(line) if self.color else line, file=self.stdout, flush=True)

    def err(self, line: str) -> None:
        print(line, file=self.stderr, flush=True)


def _rate_text(rate: float) -> str:
    # Two decimals as tqdm printed them; a run slower than 0.01 case/s still
    # shows a rate that is not 0.00.
    return f"{rate:.2f}" if rate >= 0.01 or rate == 0 else f"{rate:.2g}"


def _percent(done: int, total: int) -> int:
    # Floored: 100% only once every case is done.
    return math.floor(100 * done / total) if total > 0 else 100


class _LogLines:
    """The plain-line display for one run (see the module docstring).

    ``started`` is the clock at the first call, ``first`` the count then: the
    rates count the cases finished after it over the time since it, so the
    replayed cases of a resumed run (already counted at the first call) never
    inflate them.
    """

    def __init__(
        self,
        stream: TextIO,
        interval: float,
        clock: Clock,
        done: int,
        total: int,
        unit: str = "case",
    ) -> None:
        self.stream = stream
        self.unit = unit
        self.interval = interval
        self.clock = clock
        self.started = clock()
        self.first = done
        self.due = self.started + interval
        self.last_time = self.started
        self.last_done = done
        self.printed: int | None = None  # the completed count of the last line written
        self.done = done
        self.total = total
        self.closed = False

    def update(self, done: int, total: int) -> None:
        if self.closed:
            return
        self.done, self.total = done, total
        now = self.clock()
        if done >= total:
            self.finish(now)
            return
        if now < self.due or done == self.printed:
            return
        span = now - self.last_time
        rate = (done - self.last_done) / span if span > 0 else 0.0
        left = tqdm.format_interval((total - done) / rate) if rate > 0 else "?"
        self._write(
            f"{done}/{total} {self.unit}(s) ({_percent(done, total)}%), "
            f"{_rate_text(rate)} {self.unit}/s, "
            f"elapsed {tqdm.format_interval(now - self.started)}, left {left}"
        )
        self.last_time, self.last_done = now, done
        # The next due time after now on the grid start + k * interval: due times
        # that passed without a line are skipped, not written in a burst.
        self.due += self.interval * (math.floor((now - self.due) / self.interval) + 1)

    def finish(self, now: float) -> None:
        """The closing line (the whole run's average: ``done in`` once every case is
        done, ``stopped after`` for a run that ends short of it), unless the run
        was too short to show any line or its count is already on the last line."""
        if self.closed:
            return
        self.closed = True
        if now < self.started + self.interval or self.done == self.printed:
            return
        elapsed = now - self.started
        average = (self.done - self.first) / elapsed if elapsed > 0 else 0.0
        verb = "done in" if self.done >= self.total else "stopped after"
        self._write(
            f"{self.done}/{self.total} {self.unit}(s) ({_percent(self.done, self.total)}%) "
            f"{verb} {elapsed:.1f} s, average {_rate_text(average)} {self.unit}/s "
            "over the whole run"
        )

    def _write(self, line: str) -> None:
        self.printed = self.done
        self.stream.write(f"  {line}\n")
        self.stream.flush()


def is_terminal(stream: TextIO) -> bool:
    """Whether ``stream`` is an interactive terminal."""
    isatty = getattr(stream, "isatty", None)
    return bool(callable(isatty) and isatty())


def wants_color(stream: TextIO, env: Mapping[str, str] | None = None) -> bool:
    """Colour on ``stream``: a terminal, ``NO_COLOR`` unset or empty (no-color.org),
    and a ``TERM`` other than ``dumb``."""
    environment = os.environ if env is None else env
    return (
        is_terminal(stream)
        and not environment.get("NO_COLOR")
        and environment.get("TERM") != "dumb"
    )


_VERDICT: Final = re.compile(r"^(  (?:thresholds|must-refuse gate|answers gate): )(PASS|FAIL)")
_PAINT: Final = {"PASS": "\x1b[32m", "FAIL": "\x1b[1;31m"}
_RESET: Final = "\x1b[0m"


def paint(line: str) -> str:
    """``line`` with its gate verdict coloured (FAIL bold red, PASS green); any
    other line unchanged."""
    return _VERDICT.sub(lambda m: f"{m[1]}{_PAINT[m[2]]}{m[2]}{_RESET}", line, count=1)


class CaseProgress:
    """A :data:`Progress` on ``stream``: tqdm's bar on a terminal, plain lines elsewhere.

    ``terminal`` picks the display (default: whether ``stream`` is a
    terminal); ``interval`` is the log display's spacing in seconds and
    ``clock`` its clock (``time.monotonic``); ``unit`` names what is counted
    (``case`` for a run, ``item`` for ``load``). :meth:`close` ends the display
    (called by itself when the last one is done).
    """

    def __init__(
        self,
        stream: TextIO,
        *,
        terminal: bool | None = None,
        interval: float = LOG_INTERVAL_S,
        clock: Clock = time.monotonic,
        unit: str = "case",
    ) -> None:
        self.stream = stream
        self.unit = unit
        self.terminal = is_terminal(stream) if terminal is None else terminal
        self.interval = interval
        self.clock = clock
        self._bar: Any = None
        self._log: _LogLines | None = None

    def __call__(self, done: int, total: int) -> None:
        if not self.terminal:
            if self._log is None:
                self._log = _LogLines(
                    self.stream, self.interval, self.clock, done, total, self.unit
                )
            self._log.update(done, total)
            if done >= total:
                self.close()
            return
        if self._bar is None:
            # The first call reports the first one finished now; any count before
            # it is what a resumed run replayed: its start, not progress made now.
            # As tqdm's ``initial`` it never enters the rate.
            start = max(done - 1, 0)
            label = f"{self.unit}s (resumed at {start})" if start else f"{self.unit}s"
            self._bar = tqdm(
                total=total, initial=start, desc=label, file=self.stream, unit=self.unit, leave=True
            )
        self._bar.update(done - self._bar.n)
        if done >= total:
            self.close()

    def close(self) -> None:
        """End the display (idempotent); an unfinished run's log gets its closing line."""
        if self._bar is not None:
            self._bar.close()
            self._bar = None
        if self._log is not None:
            self._log.finish(self.clock())
            self._log = None


def case_progress(stream: TextIO, *, quiet: bool = False) -> CaseProgress | None:
    """The CLI's progress display on ``stream``, or ``None`` when ``quiet``."""
    return None if quiet else CaseProgress(stream)

"""The cases' progress display: tqdm's bar with rate and ETA on a terminal,
evenly spaced plain lines anywhere else, silence with ``--quiet``.

The log display takes its clock as an argument, so a fake clock drives it
and its spacing, counts and closing line are checked without sleeping; the
terminal bar is tqdm's, driven through ``tqdm.std.time``.
"""

from __future__ import annotations

import io
import math
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import tqdm.std
from support.paths import DATA, PROJECT_ROOT
from support.run import run_args

from taguru_eval.run.console import (
    LOG_INTERVAL_S,
    CaseProgress,
    Console,
    case_progress,
    paint,
    wants_color,
)
from taguru_refserver.serve import running_server

LOG_LINE = re.compile(
    r"  (\d+)/(\d+) case\(s\) \(\d+%\), [0-9.]+\?? case/s, elapsed [0-9:]+, left [0-9:?]+"
)
FINAL_LINE = re.compile(
    r"  (\d+)/(\d+) case\(s\) \((\d+)%\) (done in|stopped after) ([0-9.]+) s, "
    r"average ([0-9.]+) case/s over the whole run"
)


class Clock:
    """A clock that moves only when told."""

    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture()
def clock(monkeypatch: pytest.MonkeyPatch) -> Iterator[Clock]:
    fake = Clock()
    monkeypatch.setattr(tqdm.std, "time", fake)
    monkeypatch.setattr(tqdm.std.tqdm, "monitor_interval", 0)
    yield fake


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


class Stamped(io.StringIO):
    """A log stream that notes the clock's time of every line written to it."""

    def __init__(self, clock: Clock) -> None:
        super().__init__()
        self.clock = clock
        self.times: list[float] = []

    def write(self, text: str) -> int:
        self.times.extend(self.clock.now for _ in range(text.count("\n")))
        return super().write(text)


def feed(progress: CaseProgress, clock: Clock, steps: list[float], total: int) -> None:
    """Finish case ``i + 1`` ``steps[i]`` seconds after case ``i``."""
    for done, step in enumerate(steps, start=1):
        clock.now += step
        progress(done, total)


def test_a_log_gets_at_most_one_line_per_interval() -> None:
    clock = Clock()
    stream = io.StringIO()
    progress = CaseProgress(stream, clock=clock)
    assert not progress.terminal
    total = 3_000
    feed(progress, clock, [0.25] * total, total)  # four cases a second: a 750 s run
    lines = stream.getvalue().splitlines()
    elapsed = (total - 1) * 0.25  # from the first case finished to the last
    assert len(lines) <= elapsed / LOG_INTERVAL_S + 1
    assert len(lines) >= elapsed / LOG_INTERVAL_S - 1
    assert all(LOG_LINE.fullmatch(line) for line in lines[:-1]), lines[:3]
    final = FINAL_LINE.fullmatch(lines[-1])
    assert final is not None, lines[-1]
    assert final.groups() == ("3000", "3000", "100", "done in", "749.8", "4.00")
    assert "\r" not in stream.getvalue()


def test_log_lines_are_evenly_spaced_never_bunched_never_repeated() -> None:
    clock = Clock()
    stream = Stamped(clock)
    progress = CaseProgress(stream, clock=clock)
    # Bursts and stalls: 1 s apart, then a 37 s stall, 0.1 s apart, a 9.9 s
    # stall, a case exactly on a due time, and a slow tail.
    steps = [0.0] + [1.0] * 15 + [37.0] + [0.1] * 50 + [9.9] + [0.2] * 8 + [3.0] * 20
    total = len(steps)
    start = clock.now + steps[0]  # the first case finished: the display's start
    feed(progress, clock, steps, total)
    lines = stream.getvalue().splitlines()
    *regular, final = lines
    times = stream.times[: len(regular)]
    # Each line is written at or after its due time start + 10 k, one line per
    # k at most: the slots strictly increase and none is the first (0..10 s).
    slots = [math.floor((t - start) / LOG_INTERVAL_S + 1e-9) for t in times]
    assert slots == sorted(set(slots)), (slots, times)
    assert slots[0] >= 1
    # The 37 s stall passes four due times (20, 30, 40, 50 s): one line after it.
    after_stall = start + 15 + 37
    assert sum(1 for t in times if after_stall <= t < after_stall + 5) == 1
    # Never two lines for the same completed count.
    counts = [int(m.group(1)) for m in map(LOG_LINE.fullmatch, regular) if m]
    assert len(counts) == len(regular)
    assert counts == sorted(set(counts))
    match = FINAL_LINE.fullmatch(final)
    assert match is not None, final
    whole = clock.now - start
    assert match.group(1) == str(total) and match.group(4) == "done in"
    assert match.group(5) == f"{whole:.1f}"
    # The whole run's average: every case after the first, over the whole time.
    assert match.group(6) == f"{(total - 1) / whole:.2f}"
    assert int(match.group(1)) not in counts


def test_a_count_already_shown_is_not_shown_again() -> None:
    clock = Clock()
    stream = io.StringIO()
    progress = CaseProgress(stream, clock=clock)
    progress(1, 100)
    clock.now += 12
    progress(2, 100)
    clock.now += 12
    progress(2, 100)  # the same count again, past the next due time
    clock.now += 1
    progress.close()  # and once more as the closing line: not written either
    lines = stream.getvalue().splitlines()
    assert len(lines) == 1 and lines[0].startswith("  2/100 case(s) (2%), ")


def test_a_resumed_run_s_average_counts_only_the_cases_it_ran() -> None:
    clock = Clock()
    stream = io.StringIO()
    progress = CaseProgress(stream, clock=clock)
    # 1,500 cases replayed from the checkpoint arrive with the first call.
    for done in range(1_501, 3_001):
        progress(done, 3_000)
        clock.now += 0.1
    final = FINAL_LINE.fullmatch(stream.getvalue().splitlines()[-1])
    assert final is not None
    assert final.group(6) == "10.00"  # not 3,000 cases over 150 s


def test_a_short_run_prints_nothing_to_a_log() -> None:
    clock = Clock()
    stream = io.StringIO()
    progress = CaseProgress(stream, clock=clock)
    feed(progress, clock, [0.05] * 100, 100)  # 5 s in all: under one interval
    progress.close()
    assert stream.getvalue() == ""


def test_an_unfinished_run_closes_its_display() -> None:
    clock = Clock()
    stream = io.StringIO()
    progress = CaseProgress(stream, interval=1.0, clock=clock)
    feed(progress, clock, [0.5] * 10, 100)
    progress.close()
    progress.close()  # idempotent
    lines = stream.getvalue().splitlines()
    assert lines[-1].startswith("  10/100 case(s) (10%)")
    final = FINAL_LINE.fullmatch(lines[-1])
    assert final is not None, lines[-1]
    assert final.group(4, 5, 6) == ("stopped after", "4.5", "2.00")
    assert len(lines) == len(set(line.split(" case(s)")[0] for line in lines))


def test_a_terminal_gets_a_bar_with_rate_and_eta(clock: Clock) -> None:
    stream = Terminal()
    progress = CaseProgress(stream)
    assert progress.terminal
    for done in range(1, 5):
        clock.now += 0.5
        progress(done, 4)
    text = stream.getvalue()
    assert "\r" in text
    assert "| 4/4 [" in text
    assert "case/s]" in text
    # Rate and time left once the rate is known, e.g. "| 2/4 [00:00<00:00,  4.00case/s]".
    assert re.search(r"\| 2/4 \[00:0\d<00:0\d, +[0-9.]+case/s\]", text), text
    assert text.endswith("\n")


def test_quiet_means_no_display() -> None:
    assert case_progress(io.StringIO(), quiet=True) is None
    assert isinstance(case_progress(io.StringIO()), CaseProgress)


def test_the_command_line_s_stderr_in_a_pipe_has_no_progress_for_a_short_run(
    tmp_path: Path,
) -> None:
    with running_server(DATA) as url:
        argv = [*run_args(DATA / "sake" / "eval.jsonl", "sake", url)]
        completed = subprocess.run(
            [
                sys.executable,
                "-m",
                "taguru_eval",
                *argv,
                "--no-store",
                "--out",
                str(tmp_path / "e"),
            ],
            capture_output=True,
            text=True,
            cwd=PROJECT_ROOT,
            timeout=120,
            check=False,
        )
    assert completed.returncode == 0, completed.stderr
    assert "case(s) (" not in completed.stderr
    assert "case/s" not in completed.stderr


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_resumed_bar_is_labelled_and_its_rate_leaves_the_replayed_cases_out() -> None:
    stream = io.StringIO()
    progress = CaseProgress(stream, terminal=True)
    progress(5001, 10000)  # 5,000 replayed cases arrive with the first one run now
    first = stream.getvalue()
    # Its own label; the 5,000 replayed cases are where it starts, not a rate.
    assert first.lstrip("\r").startswith("cases (resumed at 5000):  50%")
    assert "5000/10000 [00:00<?, ?case/s]" in first
    progress.close()
    fresh = io.StringIO()
    CaseProgress(fresh, terminal=True)(1, 4)
    assert fresh.getvalue().lstrip("\r").startswith("cases:   0%")


def test_the_verdict_is_coloured_on_a_terminal_only() -> None:
    line = "  thresholds: FAIL — 1 violation(s) (sha256 abc…)"
    assert paint(line) == "  thresholds: \x1b[1;31mFAIL\x1b[0m — 1 violation(s) (sha256 abc…)"
    assert paint("  must-refuse gate: PASS — x") == "  must-refuse gate: \x1b[32mPASS\x1b[0m — x"
    assert paint("    [aggregate] recall.mrr: FAIL") == "    [aggregate] recall.mrr: FAIL"
    terminal = _Terminal()
    assert wants_color(terminal, {"TERM": "xterm"})
    assert not wants_color(terminal, {"NO_COLOR": "1", "TERM": "xterm"})
    assert wants_color(terminal, {"NO_COLOR": "", "TERM": "xterm"})  # empty: not set
    assert not wants_color(terminal, {"TERM": "dumb"})
    assert not wants_color(io.StringIO(), {})
    Console(stdout=terminal, color=True).out(line)
    Console(stdout=terminal, color=False).out(line)
    assert terminal.getvalue().splitlines() == [paint(line), line]

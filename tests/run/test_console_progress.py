"""The cases' progress display (tqdm): a bar with rate and ETA on a terminal,
bounded plain lines anywhere else, silence with ``--quiet``.

The log display is driven by a fake clock (tqdm reads ``tqdm.std.time``), so
the bound on its line count is checked without sleeping.
"""

from __future__ import annotations

import io
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import tqdm.std
from support.paths import DATA, PROJECT_ROOT
from support.run import run_args

from taguru_eval.refserver.serve import running_server
from taguru_eval.run.console import LOG_INTERVAL_S, CaseProgress, case_progress

LOG_LINE = re.compile(
    r"  (\d+)/(\d+) case\(s\) \(\d+%\), [0-9.]+\?? case/s, elapsed [0-9:]+, left [0-9:?]+"
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


def test_a_log_gets_at_most_one_line_per_interval(clock: Clock) -> None:
    stream = io.StringIO()
    progress = CaseProgress(stream)
    assert not progress.terminal
    total = 3_000
    for done in range(1, total + 1):
        clock.now += 0.25  # four cases a second: a 750 s run
        progress(done, total)
    lines = stream.getvalue().splitlines()
    elapsed = total * 0.25
    assert len(lines) <= elapsed / LOG_INTERVAL_S + 1
    assert len(lines) >= elapsed / LOG_INTERVAL_S - 2
    assert all(LOG_LINE.fullmatch(line) for line in lines), lines[:3]
    assert LOG_LINE.fullmatch(lines[-1]).groups() == ("3000", "3000")  # type: ignore[union-attr]
    assert "\r" not in stream.getvalue()


def test_a_short_run_prints_nothing_to_a_log(clock: Clock) -> None:
    stream = io.StringIO()
    progress = CaseProgress(stream)
    for done in range(1, 101):
        clock.now += 0.05  # 5 s in all: under one interval
        progress(done, 100)
    assert stream.getvalue() == ""


def test_an_unfinished_run_closes_its_display(clock: Clock) -> None:
    stream = io.StringIO()
    progress = CaseProgress(stream, interval=1.0)
    for done in range(1, 11):
        clock.now += 0.5
        progress(done, 100)
    progress.close()
    progress.close()  # idempotent
    lines = stream.getvalue().splitlines()
    assert lines[-1].startswith("  10/100 case(s) (10%)")


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

"""The library leaves the process as it found it: ``taguru_eval.run`` changes no
interpreter-wide setting (the collector's, the thread switch interval, the event
loop policy), neither while the cases run nor after. A caller in a notebook or a
service owns those. The cases run on uvloop's loop where it installs, chosen for
the run's own runner only."""

from __future__ import annotations

import asyncio
import gc
import importlib.util
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.paths import DATA

import taguru_eval
from taguru_refserver.serve import running_server

Settings = tuple[tuple[int, ...], bool, int, float, int]


def settings() -> Settings:
    return (
        gc.get_threshold(),
        gc.isenabled(),
        gc.get_freeze_count(),
        sys.getswitchinterval(),
        id(asyncio.get_event_loop_policy()),
    )


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    with running_server(DATA) as url:
        yield url


@pytest.fixture(params=["as the interpreter starts", "a caller's own"])
def callers_settings(request: pytest.FixtureRequest) -> Iterator[Settings]:
    """The settings a run must keep: CPython's defaults, or ones a caller chose.

    Nothing is frozen in either (objects frozen by the caller come and go with
    their references, so the count would move on its own): a run that froze
    anything would show as a count above zero."""
    saved = settings()
    if request.param == "a caller's own":
        gc.set_threshold(5_000, 7, 9)
        gc.disable()
        sys.setswitchinterval(0.001)
    try:
        yield settings()
    finally:
        gc.set_threshold(*saved[0])
        if saved[1]:
            gc.enable()
        sys.setswitchinterval(saved[3])


def test_a_library_run_changes_no_process_wide_setting(
    server: str, tmp_path: Path, callers_settings: Settings
) -> None:
    seen: list[Settings] = []
    loops: list[str] = []

    def progress(done: int, total: int) -> None:
        seen.append(settings())
        loops.append(type(asyncio.get_running_loop()).__module__.partition(".")[0])

    sake = DATA / "sake"
    result = taguru_eval.run(
        sake / "eval.jsonl",
        "sake",
        url=server,
        out=tmp_path / "evaluation.json",
        thresholds=sake / "thresholds.json",
        must_refuse=sake / "must_refuse.jsonl",
        store=tmp_path / "runs",
        concurrency=4,
        env={},
        progress=progress,
    )
    # A whole run went through: cases, probes, the gate and the store (the gate fails
    # on the must-refuse cases the server without a vector lane cannot judge).
    assert result.exit_code == 3 and result.path is not None
    assert result.doc["thresholds"]["flag_gates"][0]["passed"] is False
    assert result.cases.height == 16 and result.refusal_cases.height > 0
    # While the cases ran (the progress is called after each one) and after.
    assert len(seen) >= 16
    assert set(seen) == {callers_settings}
    assert settings() == callers_settings
    expected_loop = "uvloop" if importlib.util.find_spec("uvloop") else "asyncio"
    assert set(loops) == {expected_loop}


def test_the_command_line_process_sets_its_own_collector_thresholds() -> None:
    """``python -m taguru_eval`` owns its interpreter: it collects the young
    generation every 200,000 allocations (docs/decisions.md), where the library
    (above) leaves a caller's settings alone."""
    probe = (
        "import gc, sys\n"
        "import taguru_eval.__main__ as command\n"
        "sys.argv = ['taguru_eval', '--version']\n"
        "try:\n"
        "    command.entry()\n"
        "except SystemExit:\n"
        "    pass\n"
        "print(gc.get_threshold(), gc.isenabled(), file=sys.stderr)\n"
    )
    completed = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    )
    assert completed.stderr.strip() == "(200000, 30, 30) True"

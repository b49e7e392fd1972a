"""Stop signals are recorded and raised where the code checks (issue 44, failure 3).

Before, the command line's SIGTERM handler raised wherever the program was: in
2 of 256 trials that was inside an aiohttp finalizer the garbage collector ran,
where Python printed ``Exception ignored in … Terminated`` and dropped it — the
run went on, was stored and exited 3. These tests send real signals to this
process (``os.kill``); ``benchmarks/signal_trials.py`` sends them to whole runs
at random points.
"""

from __future__ import annotations

import asyncio
import gc
import os
import signal
from collections.abc import Iterator

import pytest

from taguru_eval._base import signals
from taguru_eval._base.signals import Terminated, stoppable
from taguru_eval.cli import main as cli_main


@pytest.fixture(autouse=True)
def python_s_own_sigint() -> Iterator[None]:
    """SIGINT as Python sets it in a process started normally. A background job of a
    non-interactive shell starts with SIGINT ignored, which Python keeps: there
    these tests would see no KeyboardInterrupt at all."""
    earlier = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, earlier)


class SignalledOnCollection:
    """A cycle whose finalizer sends SIGTERM: the signal arrives inside ``__del__``."""

    def __init__(self) -> None:
        self.me = self

    def __del__(self) -> None:
        os.kill(os.getpid(), signal.SIGTERM)


def test_a_signal_inside_a_finalizer_waits_for_the_next_check() -> None:
    with signals.deferring():
        SignalledOnCollection()
        gc.collect()  # the finalizer runs here; a raising handler's exception would be dropped
        with pytest.raises(Terminated):
            signals.check()
        signals.check()  # raised once


def test_outside_the_command_line_nothing_is_recorded() -> None:
    # The library installs no handler: SIGINT is Python's own KeyboardInterrupt.
    with pytest.raises(KeyboardInterrupt):
        os.kill(os.getpid(), signal.SIGINT)
        signals.check()  # not reached: the default handler raised already
    assert signals.unraised() is None


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_cancels_the_network_phase_and_its_cleanup_runs(signum: int) -> None:
    cleaned: list[str] = []

    async def phase() -> None:
        asyncio.get_running_loop().call_soon(os.kill, os.getpid(), signum)
        try:
            await asyncio.sleep(60)
        finally:
            cleaned.append("closed")

    with signals.deferring():
        with pytest.raises(KeyboardInterrupt) as stopped:
            asyncio.run(stoppable(phase()))
        assert isinstance(stopped.value, Terminated) == (signum == signal.SIGTERM)
        assert signals.unraised() is None
    assert cleaned == ["closed"]
    # The signal handlers are the earlier ones again.
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_a_signal_before_the_phase_starts_never_starts_it(recwarn: pytest.WarningsRecorder) -> None:
    started: list[bool] = []

    async def phase() -> None:
        started.append(True)

    with signals.deferring():
        os.kill(os.getpid(), signal.SIGTERM)
        with pytest.raises(Terminated):
            asyncio.run(stoppable(phase()))
    gc.collect()
    assert started == []
    assert not [w for w in recwarn if "never awaited" in str(w.message)]


def test_a_signal_no_check_met_still_decides_the_exit(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The run's last step done, exit 3 decided: a SIGTERM then is 143, its line."""

    def finished_then_signalled(args: object) -> int:
        os.kill(os.getpid(), signal.SIGTERM)
        return 3

    monkeypatch.setattr(cli_main, "dispatch", finished_then_signalled)
    assert cli_main.main(["run"]) == 143
    assert capsys.readouterr().err == "taguru: evaluate: terminated\n"

"""The run's event loop: uvloop's where it installs, asyncio's when asked, and never
installed process-wide."""

from __future__ import annotations

import asyncio
import importlib.util

import pytest

from taguru_eval.run import loop


async def _loop_module() -> str:
    return type(asyncio.get_running_loop()).__module__.partition(".")[0]


def test_a_run_s_loop_is_uvloop_s_where_it_installs() -> None:
    expected = "uvloop" if importlib.util.find_spec("uvloop") else "asyncio"
    policy = asyncio.get_event_loop_policy()
    assert loop.run(_loop_module()) == expected
    assert asyncio.get_event_loop_policy() is policy
    with pytest.raises(RuntimeError):  # and no loop was left as the thread's own
        asyncio.get_running_loop()


def test_asyncio_s_loop_when_the_environment_asks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(loop.LOOP_VARIABLE, "asyncio")
    assert loop.loop_factory() is None
    assert loop.run(_loop_module()) == "asyncio"

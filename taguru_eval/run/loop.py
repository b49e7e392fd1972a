"""The event loop a run's network phase runs on: uvloop's where it installs, else asyncio's.

uvloop runs the same calls at a fraction of asyncio's CPU per call
(``benchmarks/vs_taguru.py``). It is chosen per runner through
``asyncio.Runner(loop_factory=…)``: nothing process-wide changes (no event
loop policy is installed, no loop is set as the thread's current one), so a
notebook or a service that calls the library keeps its own loop and
settings. ``TAGURU_EVAL_LOOP=asyncio`` keeps asyncio's loop (to tell a loop
problem from the run's).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Coroutine
from typing import Any, Final, TypeVar

T = TypeVar("T")

LOOP_VARIABLE: Final = "TAGURU_EVAL_LOOP"


def loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop's ``new_event_loop`` where uvloop imports, else ``None`` (asyncio's own)."""
    if os.environ.get(LOOP_VARIABLE, "").strip().lower() == "asyncio":
        return None
    try:
        import uvloop
    except ImportError:  # not on this platform (Windows), or not installed
        return None
    factory: Callable[[], asyncio.AbstractEventLoop] = uvloop.new_event_loop
    return factory


def runner() -> asyncio.Runner:
    """An ``asyncio.Runner`` on :func:`loop_factory`'s loop."""
    return asyncio.Runner(loop_factory=loop_factory())


def run(coroutine: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run(coroutine)`` on :func:`loop_factory`'s loop."""
    with runner() as loop_runner:
        return loop_runner.run(coroutine)

"""The command line's one interpreter-wide setting: no cyclic collection during a run.

A run keeps every case's lane output (thousands of small dicts and lists per
case) until the artifact is written, and builds the tables, the artifact and
the store from them afterwards; none of it is cyclic, so the collector frees
nothing there and only rescans it, ever more often as the heap grows: about a
quarter of the client's CPU on a large run (``benchmarks/end_to_end.py
--held-off`` measures it).

The library never touches the collector (a notebook or a service that calls
``taguru_eval.run`` owns its interpreter); the command line owns its process,
so run mode holds the collector off for the run and puts its state back after.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Final

BULK: Final = 100_000
"""Objects made inside :func:`held_off` past which they go straight to the oldest
generation on leaving."""


@contextmanager
def held_off() -> Iterator[None]:
    """No automatic collection inside; the collector's state comes back on leaving,
    however the scope ends."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if gc.get_count()[0] > BULK and gc.get_freeze_count() == 0:
            # Whatever the run left alive would otherwise all be young, and the
            # first collection would scan every object of it; freezing and
            # thawing makes it old in constant time (nothing else was frozen).
            gc.freeze()
            gc.unfreeze()
        if enabled:
            gc.enable()

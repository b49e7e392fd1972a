"""The cyclic garbage collector around bulk work: paused while acyclic data is built,
and kept from rescanning a run's long-lived data over and over.

A 100,000-case run keeps every case's lane output (tens of millions of small
dicts and lists) until the artifact is written. CPython's collector rescans
all of them at every full collection, and full collections come more often
the more the program allocates: at 30,000 cases they were 12 % of the network
phase and more than half of everything after it (benchmarks/README.md).
None of that data is cyclic, so:

* :func:`paused` holds the collector off while acyclic objects are made by
  the hundred thousand (decoding eval.jsonl, building the tables, the
  artifact and the store), and on leaving, when it made more than
  :data:`YOUNG_THRESHOLD` of them, hands them to the oldest generation at
  once: else the first young collection after it scans every one of them
  (0.9 s after loading 1,000,000 cases);
* inside :func:`long_lived`, :func:`settle` moves everything allocated so far
  out of the collector's sight (``gc.freeze``), so a collection only looks
  at what is new; leaving the scope hands it all back (``gc.unfreeze``),
  where the next full collection sees it once. A process that froze objects
  itself keeps its own arrangement: the scope then does nothing.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Final

YOUNG_THRESHOLD: Final = 100_000
"""Allocations between two collections of the youngest generation inside a scope,
and what a pause must have made for its objects to go straight to the oldest one."""

_settling = False


@contextmanager
def paused() -> Iterator[None]:
    """No automatic collection inside (the previous state comes back after)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if gc.get_count()[0] > YOUNG_THRESHOLD and gc.get_freeze_count() == 0:
            # Freezing and thawing moves every tracked object to the oldest
            # generation in constant time (a process's own frozen objects stay put).
            # Only after bulk work: whatever young garbage the process had goes too.
            gc.freeze()
            gc.unfreeze()
        if enabled:
            gc.enable()


@contextmanager
def long_lived() -> Iterator[None]:
    """A scope in which :func:`settle` may hide long-lived objects from the collector."""
    global _settling
    owns = not _settling and gc.get_freeze_count() == 0
    thresholds = gc.get_threshold()
    if owns:
        _settling = True
        gc.set_threshold(max(thresholds[0], YOUNG_THRESHOLD), *thresholds[1:])
    try:
        yield
    finally:
        if owns:
            _settling = False
            gc.set_threshold(*thresholds)
            gc.unfreeze()


def settle() -> None:
    """Inside :func:`long_lived`: stop rescanning everything allocated so far."""
    if _settling:
        gc.freeze()

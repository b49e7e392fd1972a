"""``python -m taguru_eval`` and the ``taguru-eval`` script: the command line.

A stop signal is recorded from the first line the program runs (before the
command line's modules are imported), so one that arrives while they load is
acted on like any other (:func:`taguru_eval._base.signals.record_from_now`).

The process is the command line's own, so it also sets the cyclic collector's
thresholds (:data:`COLLECTOR_THRESHOLDS`); the library never touches them
(``tests/test_api_process_state.py``), a notebook or a service owns its own."""

from __future__ import annotations

import gc
import sys
from typing import Final

from taguru_eval._base import signals

COLLECTOR_THRESHOLDS: Final = (200_000, 30, 30)
"""A young collection every 200,000 net allocations of tracked objects, not 700.

A run allocates a few hundred short-lived dicts and lists a case (decoded hits,
table rows, rendered lane values) and frees almost all by reference counting;
at CPython's default the collector ran ~3,000 young and ~25 full collections in
a 20,000-case run, rescanning the loaded eval set and modules each time: 15–20 %
of the client's CPU against the real taguru (benchmarks/vs_taguru.py,
docs/decisions.md). What cycles a run leaves are still collected, after at most
this many allocations (mypy's command line uses the same figures)."""


def entry() -> None:
    """The process's command line: records stop signals, runs it, exits with its code."""
    signals.record_from_now()
    gc.set_threshold(*COLLECTOR_THRESHOLDS)
    from taguru_eval.cli.main import main

    sys.exit(main())


if __name__ == "__main__":
    entry()

"""``python -m taguru_eval`` and the ``taguru-eval`` script: the command line.

A stop signal is recorded from the first line the program runs (before the
command line's modules are imported), so one that arrives while they load is
acted on like any other (:func:`taguru_eval._base.signals.record_from_now`)."""

from __future__ import annotations

import sys

from taguru_eval._base import signals


def entry() -> None:
    """The process's command line: records stop signals, runs it, exits with its code."""
    signals.record_from_now()
    from taguru_eval.cli.main import main

    sys.exit(main())


if __name__ == "__main__":
    entry()

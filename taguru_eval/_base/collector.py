"""The cyclic garbage collector held off while the eval set is decoded.

Only ``inputs/dataset_fast.py`` uses this; the run itself leaves the collector
alone (the command line's own setting is ``cli/collector.py``).

Decoding a large eval.jsonl makes acyclic objects by the hundred thousand;
:func:`paused` holds the collector off meanwhile, and on leaving, when it made
more than :data:`YOUNG_THRESHOLD` of them, hands them to the oldest generation
at once: else the first young collection after it scans every one of them
(0.9 s after loading 1,000,000 cases).
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Final

YOUNG_THRESHOLD: Final = 100_000
"""What a pause must have made for its objects to go straight to the oldest generation."""


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

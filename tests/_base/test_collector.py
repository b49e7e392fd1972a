"""The loader's collector pause: the previous state comes back, and bulk work ends old."""

from __future__ import annotations

import gc

from taguru_eval._base import collector


def test_paused_restores_whatever_state_it_found() -> None:
    assert gc.isenabled()
    with collector.paused():
        assert not gc.isenabled()
        with collector.paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()


def test_what_a_bulk_pause_made_is_old_when_it_ends() -> None:
    gc.collect()
    with collector.paused():
        made = [[index] for index in range(collector.YOUNG_THRESHOLD + 1)]
    # Nothing young is left for the next collection to scan.
    assert gc.get_count()[0] < 100
    assert all(gc.is_tracked(row) for row in made[:10])
    assert any(made[0] is item for item in gc.get_objects(generation=2))


def test_a_small_pause_leaves_the_generations_alone() -> None:
    gc.collect()
    with collector.paused():
        made = [[index] for index in range(1_000)]
    # The young collections take them as usual (the first one runs at once).
    assert not any(made[0] is item for item in gc.get_objects(generation=2))

"""The collector helpers: a pause restores the previous state, settling only inside a scope."""

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


def test_settle_freezes_only_inside_a_scope_and_the_scope_hands_everything_back() -> None:
    assert gc.get_freeze_count() == 0
    collector.settle()
    assert gc.get_freeze_count() == 0
    with collector.long_lived():
        kept = [{"case": index} for index in range(100)]
        collector.settle()
        assert gc.get_freeze_count() > 0
        with collector.long_lived():  # nested: the outer scope still owns it
            collector.settle()
        assert gc.get_freeze_count() > 0
    assert gc.get_freeze_count() == 0
    assert len(kept) == 100


def test_a_process_that_froze_objects_itself_keeps_them_frozen() -> None:
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        with collector.long_lived():
            collector.settle()
            assert gc.get_freeze_count() == frozen
        assert gc.get_freeze_count() == frozen
    finally:
        gc.unfreeze()


def test_a_scope_collects_the_young_generation_less_often_and_restores_the_thresholds() -> None:
    before = gc.get_threshold()
    with collector.long_lived():
        assert gc.get_threshold()[0] == max(before[0], collector.YOUNG_THRESHOLD)
        assert gc.get_threshold()[1:] == before[1:]
        with collector.long_lived():
            assert gc.get_threshold()[0] == max(before[0], collector.YOUNG_THRESHOLD)
        assert gc.get_threshold()[0] == max(before[0], collector.YOUNG_THRESHOLD)
    assert gc.get_threshold() == before


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

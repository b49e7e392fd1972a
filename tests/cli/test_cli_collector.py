"""Run mode's collector setting: held off for the run, the caller's state back after."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from pathlib import Path

import pytest

from taguru_eval.cli import collector
from taguru_eval.cli import run as cli_run
from taguru_eval.cli.main import main
from taguru_eval.inputs.prepare import PreparedRun


@pytest.fixture
def enabled() -> Iterator[None]:
    """The collector on when the test starts, and on again however it ends."""
    gc.enable()
    try:
        yield
    finally:
        gc.enable()


def test_the_scope_holds_the_collector_off_and_restores_its_state(enabled: None) -> None:
    with collector.held_off():
        assert not gc.isenabled()
        with collector.held_off():
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()
    gc.disable()
    with collector.held_off():
        assert not gc.isenabled()
    assert not gc.isenabled()


def test_what_the_scope_made_in_bulk_is_old_when_it_ends(enabled: None) -> None:
    gc.collect()
    with collector.held_off():
        made = [[index] for index in range(collector.BULK + 1)]
    # Nothing young is left for the next collection to scan.
    assert gc.get_count()[0] < 100
    assert gc.get_freeze_count() == 0
    assert any(made[0] is item for item in gc.get_objects(generation=2))


def test_a_small_scope_leaves_the_generations_alone(enabled: None) -> None:
    gc.collect()
    with collector.held_off():
        made = [[index] for index in range(1_000)]
    assert not any(made[0] is item for item in gc.get_objects(generation=2))


def test_objects_the_process_froze_stay_frozen(enabled: None) -> None:
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        with collector.held_off():
            made = [[index] for index in range(collector.BULK + 1)]
        assert gc.get_freeze_count() == frozen
        assert not any(made[0] is item for item in gc.get_objects(generation=2))
    finally:
        gc.unfreeze()


def test_run_mode_runs_under_the_scope(
    enabled: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    seen: list[bool] = []

    def prepared(options: object, env: object) -> PreparedRun:
        seen.append(gc.isenabled())
        return object()  # type: ignore[return-value]

    def ran(prepared: PreparedRun) -> int:
        seen.append(gc.isenabled())
        return 3

    monkeypatch.setattr(cli_run, "prepare_run", prepared)
    monkeypatch.setattr(cli_run, "run_prepared", ran)
    assert main(["run", "--eval", str(tmp_path / "e.jsonl"), "--context", "c"]) == 3
    assert seen == [False, False]
    assert gc.isenabled()


def test_a_run_that_fails_restores_the_collector_too(
    enabled: None, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    assert main(["run", "--eval", str(tmp_path / "missing.jsonl"), "--context", "c"]) == 2
    assert "missing.jsonl" in capsys.readouterr().err
    assert gc.isenabled()

"""The one bounded runner behind the cases, the must-refuse probes and refusal-bands."""

from __future__ import annotations

import asyncio
import random

import pytest

from taguru_eval.run.bounded import in_order


def test_results_come_back_in_item_order_with_at_most_concurrency_in_flight() -> None:
    rng = random.Random(7)
    delays = [rng.uniform(0, 0.01) for _ in range(40)]
    started: list[int] = []
    finished: list[int] = []
    seen: list[int] = []
    progress: list[tuple[int, int]] = []
    in_flight = 0
    most = 0

    async def work(index: int, delay: float) -> int:
        nonlocal in_flight, most
        started.append(index)
        in_flight += 1
        most = max(most, in_flight)
        await asyncio.sleep(delay if index % 3 else 0.02)  # every third item is slow
        in_flight -= 1
        finished.append(index)
        return index * 10

    results = asyncio.run(
        in_order(
            delays,
            work,
            4,
            lambda done, total: progress.append((done, total)),
            seen.append,
        )
    )
    assert results == [index * 10 for index in range(40)]
    assert started == list(range(40))  # taken in file order
    assert finished != sorted(finished)  # they did finish out of order
    assert most == 4
    assert sorted(seen) == results and seen != results  # each result, as it finished
    assert progress == [(done, 40) for done in range(1, 41)]


def test_the_first_failure_cancels_the_rest_and_is_raised() -> None:
    cancelled: list[int] = []

    async def work(index: int, _item: None) -> int:
        if index == 2:
            raise RuntimeError("boom")
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            cancelled.append(index)
            raise
        return index

    with pytest.raises(RuntimeError, match="boom"):
        asyncio.run(in_order([None] * 6, work, 3))
    assert sorted(cancelled) == [0, 1]  # the two in flight; the rest never started


def test_no_items_and_a_concurrency_below_one() -> None:
    async def work(index: int, item: str) -> str:
        return item * 2

    assert asyncio.run(in_order([], work, 8)) == []
    assert asyncio.run(in_order(["a", "b"], work, 0)) == ["aa", "bb"]

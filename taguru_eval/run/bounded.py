"""Running a list of cases concurrently under one bound, results in case order."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

from taguru_eval.run.console import Progress

Item = TypeVar("Item")
Result = TypeVar("Result")


async def in_order(
    items: Sequence[Item],
    work: Callable[[int, Item], Awaitable[Result]],
    concurrency: int,
    progress: Progress | None = None,
) -> list[Result]:
    """``work(index, item)`` for every item, at most ``concurrency`` in flight,
    results in item order; the first failure cancels the rest and is raised.

    The slot is taken before an item's first call, so waiting for it is never
    part of any latency (the client times the exchange alone).
    """
    slots = asyncio.Semaphore(max(1, concurrency))
    done = 0

    async def one(index: int, item: Item) -> Result:
        nonlocal done
        async with slots:
            result = await work(index, item)
        done += 1
        if progress is not None:
            progress(done, len(items))
        return result

    tasks = [asyncio.ensure_future(one(index, item)) for index, item in enumerate(items)]
    try:
        return list(await asyncio.gather(*tasks))
    except BaseException:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise

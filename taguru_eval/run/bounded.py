"""Running a list of cases concurrently under one bound, results in case order."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar, cast

from taguru_eval.run.console import Progress

Item = TypeVar("Item")
Result = TypeVar("Result")


async def in_order(
    items: Sequence[Item],
    work: Callable[[int, Item], Awaitable[Result]],
    concurrency: int,
    progress: Progress | None = None,
    on_result: Callable[[Result], None] | None = None,
) -> list[Result]:
    """``work(index, item)`` for every item, at most ``concurrency`` in flight,
    results in item order; the first failure cancels the rest and is raised.
    ``on_result`` sees each result as soon as its item finishes (any order).

    ``concurrency`` workers take the items in order, each starting its next
    item the moment its last one finished: the next request leaves in the
    same step of the event loop, not after every other ready callback, so
    requests stay spread over time instead of bunching into waves, and no
    task waits per item. An item is taken before its
    first call, so waiting for a worker is never part of any latency (the
    client times the exchange alone).
    """
    results: list[Result | None] = [None] * len(items)
    queue = iter(enumerate(items))  # shared: each item is taken once, in order
    done = 0

    async def worker() -> None:
        nonlocal done
        for index, item in queue:
            result = await work(index, item)
            results[index] = result
            if on_result is not None:
                on_result(result)
            done += 1
            if progress is not None:
                progress(done, len(items))

    workers = [asyncio.ensure_future(worker()) for _ in range(min(max(1, concurrency), len(items)))]
    try:
        await asyncio.gather(*workers)
    except BaseException:
        for task in workers:
            task.cancel()
        await asyncio.gather(*workers, return_exceptions=True)
        raise
    # Every worker ran to the end of the queue, so every slot holds its result.
    return cast(list[Result], results)

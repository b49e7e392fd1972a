"""Running cases concurrently under one bound: each result handed on as it
finishes (:func:`each_bounded`), or all kept in case order (:func:`in_order`)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import TypeVar, cast

from taguru_eval.run.console import Progress

Item = TypeVar("Item")
Result = TypeVar("Result")


async def each_bounded(
    items: Iterable[tuple[int, Item]],
    total: int,
    work: Callable[[int, Item], Awaitable[Result]],
    concurrency: int,
    on_result: Callable[[Result], None],
    progress: Progress | None = None,
) -> int:
    """``work(index, item)`` for every ``(index, item)``, at most ``concurrency`` in
    flight, each result handed to ``on_result`` as soon as its item finishes (any
    order) and kept nowhere else; returns how many finished. The first failure
    cancels the rest and is raised. ``total`` is what ``progress`` counts towards.

    ``concurrency`` workers take the items in order, each starting its next
    item the moment its last one finished: the next request leaves in the
    same step of the event loop, not after every other ready callback, so
    requests stay spread over time instead of bunching into waves, and no
    task waits per item. An item is taken before its
    first call, so waiting for a worker is never part of any latency (the
    client times the exchange alone).
    """
    queue = iter(items)  # shared: each item is taken once, in order
    done = 0

    async def worker() -> None:
        nonlocal done
        for index, item in queue:
            on_result(await work(index, item))
            done += 1
            if progress is not None:
                progress(done, total)

    workers = [asyncio.ensure_future(worker()) for _ in range(min(max(1, concurrency), total))]
    try:
        await asyncio.gather(*workers)
    except BaseException:
        for task in workers:
            task.cancel()
        await asyncio.gather(*workers, return_exceptions=True)
        raise
    return done


async def in_order(
    items: Sequence[Item],
    work: Callable[[int, Item], Awaitable[Result]],
    concurrency: int,
    progress: Progress | None = None,
    on_result: Callable[[Result], None] | None = None,
) -> list[Result]:
    """:func:`each_bounded` over ``items``, the results kept and returned in item
    order (``on_result`` still sees each as it finishes)."""
    results: list[Result | None] = [None] * len(items)

    def kept(index: int, item: Item) -> Awaitable[tuple[int, Result]]:
        return _indexed(index, work(index, item))

    def keep(indexed: tuple[int, Result]) -> None:
        index, result = indexed
        results[index] = result
        if on_result is not None:
            on_result(result)

    await each_bounded(enumerate(items), len(items), kept, concurrency, keep, progress)
    # Every worker ran to the end of the queue, so every slot holds its result.
    return cast(list[Result], results)


async def _indexed(index: int, result: Awaitable[Result]) -> tuple[int, Result]:
    return index, await result

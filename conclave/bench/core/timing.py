"""How the load-generating suites time calls: sequential latencies, and calls/s of workers
running at once, each worker one call function (its own connection and identity)."""

from __future__ import annotations

import time
from collections.abc import Callable, Coroutine, Sequence
from typing import Any

import anyio

Call = Callable[[], Coroutine[Any, Any, None]]


async def latencies(call: Call, count: int) -> list[float]:
    """`count` sequential calls' durations (ms), after up to 50 unmeasured warm-up calls."""
    for _ in range(min(50, count)):  # warm connections, caches, sessions and scripts
        await call()
    samples = []
    for _ in range(count):
        began = time.perf_counter()
        await call()
        samples.append((time.perf_counter() - began) * 1000)
    return samples


async def alternated_latencies(calls: Sequence[Call], count: int) -> list[list[float]]:
    """`latencies` of each of `calls`, taken in turns (one call of each, `count` times): a
    change in the machine's other load falls on all of them alike, so their difference is
    measured within one stretch of time."""
    for _ in range(min(50, count)):
        for call in calls:
            await call()
    samples: list[list[float]] = [[] for _ in calls]
    for _ in range(count):
        for call, taken in zip(calls, samples, strict=True):
            began = time.perf_counter()
            await call()
            taken.append((time.perf_counter() - began) * 1000)
    return samples


async def throughput(calls: list[Call], seconds: float, *, warm: bool = False) -> float:
    """Calls/s with one worker per call function for `seconds`; `warm`: each makes one
    unmeasured call first, all at once (so their sandboxes start before the clock)."""
    if warm:
        async with anyio.create_task_group() as warming:
            for call in calls:
                warming.start_soon(call)
    done = 0
    stop = time.perf_counter() + seconds

    async def worker(call: Call) -> None:
        nonlocal done
        while time.perf_counter() < stop:
            await call()
            done += 1

    began = time.perf_counter()
    async with anyio.create_task_group() as group:
        for call in calls:
            group.start_soon(worker, call)
    return done / (time.perf_counter() - began)

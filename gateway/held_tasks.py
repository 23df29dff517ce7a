"""Tasks the gateway starts and does not await, held until they end: the event loop keeps
only a weak reference to a task, so one nothing else references can be collected mid-run."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any


class HeldTasks:
    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[None]] = set()

    def start(self, work: Coroutine[Any, Any, None]) -> None:
        """Run `work` as a task of the running loop, held until it ends."""
        task = asyncio.get_running_loop().create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

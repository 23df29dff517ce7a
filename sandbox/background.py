"""`BackgroundWork`: one task group, and the work its owner runs off the callers' path.

The warm pool enters its group when it opens and leaves it when it closes, so nothing it
starts outlives it: sandboxes started past their call's deadline, cancelled calls' sandboxes
settling, teardowns, replacements of killed sandboxes, spares, and the reaper. The docker
fleet keeps its engines' health checks and the work left on a drained engine in one too. A
piece of work that fails is logged, never raised into the group: it would cancel every other
piece, and the group's owner with them (the gateway's lifespan).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from typing import Any, TypeVarTuple

import anyio
from anyio.abc import TaskGroup, TaskStatus

log = logging.getLogger("conclave.sandbox")
Args = TypeVarTuple("Args")


class BackgroundWork:
    def __init__(self, owner: str = "the sandbox pool") -> None:
        """`owner` names what holds the group, in its errors and logs."""
        self._owner = owner
        self._exit: AsyncExitStack | None = None
        self._group: TaskGroup | None = None
        self._closed = False
        self._pending = 0  # pieces of work started and not yet ended (`forever` ones aside)
        self._drained: anyio.Event | None = None  # set when `_pending` comes down to 0
        self._forever: list[tuple[anyio.CancelScope, anyio.Event]] = []  # (scope, ended)

    async def open(self) -> None:
        """Enter the task group, in the task that will `aclose` it (a task group is left by
        the task that entered it)."""
        if self._exit is not None or self._closed:
            raise RuntimeError(f"{self._owner} opens once")
        exit_stack = AsyncExitStack()
        self._group = await exit_stack.enter_async_context(anyio.create_task_group())
        self._exit = exit_stack

    def start(self, work: Callable[[*Args], Awaitable[Any]], *args: *Args) -> bool:
        """Run `work(*args)` in the group; False when the group was closed already."""
        if self._group is None:
            if self._closed:  # a call that outlived the owner: it has nothing left to keep
                log.warning(
                    "%s is closed: %s not run", self._owner, getattr(work, "__name__", work)
                )
                return False
            raise RuntimeError(f"open {self._owner} (async with it) before its first call")
        self._pending += 1
        self._group.start_soon(self._supervised, work, *args)
        return True

    async def start_forever(self, work: Callable[[], Awaitable[Any]]) -> None:
        """Run `work` in the group until `aclose` (it is not waited for, it is cancelled)."""
        assert self._group is not None, "open first"
        await self._group.start(self._until_closed, work)

    async def settled(self) -> None:
        """Return once no work runs (work it started meanwhile included)."""
        while self._pending:
            drained = self._drained = anyio.Event()
            await drained.wait()

    async def stop_forever(self) -> None:
        """Cancel the `forever` work and return once it has ended."""
        for scope, _ in self._forever:
            scope.cancel()
        for _, ended in self._forever:
            await ended.wait()

    def cancel(self) -> None:
        """Cancel all the work still running: `aclose` then waits only for what a cancel
        cannot stop at once (a call blocked in a thread ends first)."""
        if self._group is not None:
            self._group.cancel_scope.cancel()

    async def aclose(self) -> None:
        """Cancel the `forever` work, wait for the rest and leave the group."""
        exit_stack, self._exit = self._exit, None
        self._closed = True
        for scope, _ in self._forever:
            scope.cancel()
        if exit_stack is not None:
            try:
                await exit_stack.aclose()
            finally:
                self._group = None

    async def _supervised(self, work: Callable[[*Args], Awaitable[Any]], *args: *Args) -> None:
        try:
            await work(*args)
        except Exception:
            log.warning("background work of %s failed", self._owner, exc_info=True)
        finally:
            self._pending -= 1
            if not self._pending and self._drained is not None:
                self._drained.set()

    async def _until_closed(
        self, work: Callable[[], Awaitable[Any]], *, task_status: TaskStatus[None]
    ) -> None:
        ended = anyio.Event()
        try:
            with anyio.CancelScope() as scope:
                self._forever.append((scope, ended))
                task_status.started()
                await work()
        finally:
            ended.set()

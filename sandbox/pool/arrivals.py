"""Sandboxes on their way to an identity's idle pool, and the calls that wait for them.

Two kinds arrive late: a cancelled call's sandbox (its runner was asked to kill the call; it
goes back warm once the runner answers) and a cold start that outlived its caller's deadline
(`StartsByDeadline`: the caller stops waiting then, and the start finishes in the pool's task
group). The identity's next call (its retry, typically) waits for them (`Arrivals.wait`,
never past its deadline) instead of starting another: under load each retry would miss its
deadline too, and the tenant's share would fill with starts nobody waits for.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import anyio

from sandbox.background import BackgroundWork
from sandbox.instance import Sandbox
from sandbox.pool.fair_share import Grant, PoolFullError
from sandbox.pool.profiles import PoolKey
from tools.calls import TimeLimit

Fulfil = Callable[[PoolKey, Grant], Awaitable[Sandbox]]  # the sandbox a grant stands for
CheckIn = Callable[[PoolKey, Sandbox, bool], Awaitable[None]]  # (key, sandbox, recycle)


@dataclass
class Arriving:
    """A sandbox on its way to an identity's idle pool: a cancelled call's (its runner was
    asked to kill the call) or a cold start its caller stopped waiting for. The identity's
    next call waits for it, up to `wait_s` (None: its deadline), instead of starting another."""

    wait_s: float | None
    done: anyio.Event = field(default_factory=anyio.Event)


class Arrivals:
    """Per identity (the pool's key), the sandboxes on their way to its idle pool."""

    def __init__(self) -> None:
        self._by_key: dict[PoolKey, list[Arriving]] = {}

    def __contains__(self, key: PoolKey) -> bool:
        return key in self._by_key

    def expect(self, key: PoolKey, wait_s: float | None) -> Arriving:
        arriving = Arriving(wait_s)
        self._by_key.setdefault(key, []).append(arriving)
        return arriving

    def arrived(self, key: PoolKey, arriving: Arriving) -> None:
        """The sandbox is in the idle pool (or was torn down): callers waiting go on."""
        arriving.done.set()
        waiting = self._by_key.get(key, [])
        if arriving in waiting:
            waiting.remove(arriving)
        if not waiting:
            self._by_key.pop(key, None)

    async def wait(self, key: PoolKey, limit: TimeLimit) -> None:
        """Wait (never past the deadline) for this identity's sandboxes on their way to its
        idle pool: the call after a cancel or a missed deadline then finds one warm."""
        for arriving in list(self._by_key.get(key, ())):
            left = limit.left_s()
            caps = [s for s in (left, arriving.wait_s) if s is not None]
            with anyio.move_on_after(min(caps) if caps else None):
                await arriving.done.wait()


@dataclass
class _Start:
    """A cold start run in the pool's task group for a caller that waits until its deadline."""

    done: anyio.Event = field(default_factory=anyio.Event)
    sandbox: Sandbox | None = None
    error: Exception | None = None
    # The caller stopped waiting: the sandbox goes to the idle pool, where the identity's
    # next call (its retry, typically) waits for it instead of starting another.
    abandoned: Arriving | None = None


class StartsByDeadline:
    """Cold starts that a caller waits for until its deadline, and no longer: a start (seconds
    under load) goes on in the pool's task group, and the sandbox then goes to the idle pool
    warm, announced in `arrivals`."""

    def __init__(
        self, work: BackgroundWork, arrivals: Arrivals, fulfil: Fulfil, checkin: CheckIn
    ) -> None:
        self._work = work
        self._arrivals = arrivals
        self._fulfil = fulfil
        self._checkin = checkin

    async def start(self, key: PoolKey, grant: Grant, limit: TimeLimit) -> Sandbox | None:
        """The sandbox a grant starts, or None when the deadline came first."""
        start = _Start()
        self._work.start(self._start_for, key, grant, start)
        taken = False
        try:
            with anyio.move_on_after(limit.left_s()):
                await start.done.wait()
            taken = start.done.is_set()
        finally:
            if not taken:  # the deadline, or the caller cancelled: nobody takes it
                self._abandon(key, start)
        if not taken:
            return None
        if start.error is not None:
            raise start.error
        if start.sandbox is None:
            raise PoolFullError("the sandbox pool shut down while this call's sandbox started")
        return start.sandbox

    async def _start_for(self, key: PoolKey, grant: Grant, start: _Start) -> None:
        try:
            start.sandbox = await self._fulfil(key, grant)
        except Exception as exc:  # the waiting caller reports it; nobody else has to
            start.error = exc
        finally:
            start.done.set()
        if start.abandoned is None:
            return
        try:
            if start.sandbox is not None:
                await self._checkin(key, start.sandbox, False)
        finally:
            self._arrivals.arrived(key, start.abandoned)

    def _abandon(self, key: PoolKey, start: _Start) -> None:
        """The caller stopped waiting: a sandbox started for it goes to the idle pool."""
        if not start.done.is_set():  # `_start_for` checks it in when it is up
            start.abandoned = self._arrivals.expect(key, None)
        elif start.sandbox is not None:
            self._work.start(self._checkin, key, start.sandbox, False)

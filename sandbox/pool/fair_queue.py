"""Calls waiting for a sandbox: a short queue per tenant, served round robin by tenant.

When a sandbox frees up, the pool asks `FairQueue.serve` to hand out what it can: each
tenant with waiters gets one grant in turn, starting with the tenant that was served least
recently, so a tenant with a hundred waiters cannot starve one with a single waiter. Within a
tenant, the oldest waiter its caps admit goes first. A tenant may have at most
`depth_per_tenant` calls waiting; `join` refuses the next one.

The queue holds no lock of its own: the pool calls it only from code that does not await,
so on one event loop each call runs whole.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

import anyio

K = TypeVar("K")  # what a waiter asks for (the pool's key: tenant, agent, profile)
G = TypeVar("G")  # what it is granted


@dataclass(eq=False)
class Waiter(Generic[K, G]):
    """One queued call: `granted` is set once `grant` holds what it was given."""

    tenant: str
    key: K
    granted: anyio.Event = field(default_factory=anyio.Event)
    grant: G | None = None


class FairQueue(Generic[K, G]):
    def __init__(self, depth_per_tenant: int) -> None:
        self.depth_per_tenant = depth_per_tenant
        # Tenants in the order they are served next; a tenant just served moves to the back.
        self._turns: dict[str, deque[Waiter[K, G]]] = {}

    def waiting(self, tenant: str) -> int:
        """How many of this tenant's calls are waiting."""
        return len(self._turns.get(tenant, ()))

    def join(self, tenant: str, key: K) -> Waiter[K, G] | None:
        """A place in the tenant's queue, or None when that queue is full."""
        if self.waiting(tenant) >= self.depth_per_tenant:
            return None
        waiter: Waiter[K, G] = Waiter(tenant, key)
        self._turns.setdefault(tenant, deque()).append(waiter)
        return waiter

    def leave(self, waiter: Waiter[K, G]) -> None:
        """Take a waiter out of its queue (nothing happens if it was served already)."""
        waiters = self._turns.get(waiter.tenant)
        if waiters is None or waiter not in waiters:
            return
        waiters.remove(waiter)
        if not waiters:
            del self._turns[waiter.tenant]

    def serve(self, admit: Callable[[K], G | None]) -> None:
        """Grant waiters what `admit` allows (None: not now), one per tenant in turn, until a
        whole round grants nothing."""
        granted = True
        while granted:
            granted = False
            for tenant in list(self._turns):
                waiters = self._turns[tenant]
                waiter = next((w for w in waiters if self._granted(w, admit)), None)
                if waiter is None:
                    continue
                granted = True
                waiters.remove(waiter)
                del self._turns[tenant]  # to the back of the rotation
                if waiters:
                    self._turns[tenant] = waiters

    @staticmethod
    def _granted(waiter: Waiter[K, G], admit: Callable[[K], G | None]) -> bool:
        grant = admit(waiter.key)
        if grant is None:
            return False
        waiter.grant = grant
        waiter.granted.set()
        return True

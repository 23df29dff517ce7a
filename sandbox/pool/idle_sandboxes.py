"""The pool's idle sandboxes, warm per identity and profile, and which goes first when one
must: past its idle time (`take_expired`), or for room (`take_oldest`).

A sandbox held for a subscription (`Sandbox.held`) is never expired, and is taken for room
only after every idle one that is not held.
"""

from __future__ import annotations

import time
from collections import Counter

from sandbox.instance import Sandbox
from sandbox.pool.profiles import PoolKey


class IdleSandboxes(dict[PoolKey, list[Sandbox]]):
    """Per pool key, its idle sandboxes (the last one returned is taken first)."""

    def add(self, key: PoolKey, sandbox: Sandbox) -> None:
        self.setdefault(key, []).append(sandbox)

    @property
    def count(self) -> int:
        return sum(map(len, self.values()))

    def every(self) -> list[Sandbox]:
        return [sandbox for sandboxes in self.values() for sandbox in sandboxes]

    def per_tenant(self) -> Counter[str]:
        idle: Counter[str] = Counter()
        for (tenant, _, _), sandboxes in self.items():
            idle[tenant] += len(sandboxes)
        return idle

    def take_expired(self, idle_s: float) -> list[Sandbox]:
        """Take out those idle for longer than `idle_s` that no subscription holds."""
        now = time.monotonic()
        expired: list[Sandbox] = []
        for key, sandboxes in list(self.items()):
            keep = [s for s in sandboxes if now - s.last_used < idle_s or s.held]
            expired += [s for s in sandboxes if s not in keep]
            if keep:
                self[key] = keep
            else:
                del self[key]
        return expired

    def take_oldest(self, in_use_per_tenant: Counter[str]) -> Sandbox | None:
        """Take out the idle sandbox to tear down for room: the least recently used one of the
        tenant that holds the most sandboxes (`in_use_per_tenant` and idle), so a tenant
        starting many never evicts the one warm sandbox of a tenant that holds few."""
        held = in_use_per_tenant
        for key, sandboxes in self.items():
            held[key[0]] += len(sandboxes)
        candidates = [
            (s.held, -held[key[0]], s.last_used, key, s) for key, v in self.items() for s in v
        ]
        if not candidates:
            return None
        *_, key, oldest = min(candidates, key=lambda c: (c[0], c[1], c[2]))
        self[key].remove(oldest)
        if not self[key]:
            del self[key]
        return oldest

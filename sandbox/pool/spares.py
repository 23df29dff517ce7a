"""`Spares`: the pre-started sandboxes the warm pool keeps for identities it has not seen.

A spare belongs to a tenant, never to an identity yet: it is started in its tenant's cgroup,
where its CPU counts against that tenant's share (`sandbox.backends.cgroup`), and only an
agent of that tenant takes it. (A spare of nobody's, taken by whichever tenant came first,
stayed in a group of its own for its whole life: under a flood the victim's sandbox and the
attacker's shared that group, and no tenant share kept them apart.) The pool keeps one spare
per chosen profile for the tenant of its last cold start: with `spares`, of those profiles;
unset, of the profile that cold start had. A new agent of that tenant with no warm sandbox of
that profile takes it (its workspace becomes that identity's; it never returns to being a
spare), so its first call skips the start, and a new spare starts in the background once the
call is done. A spare counts against `pool_max`, is the first torn down when a call needs
room, is started only while there is room, is never reaped as idle, and is torn down with
the pool.

This module keeps the books; the pool starts and tears down the sandboxes they name.
"""

from __future__ import annotations

from collections.abc import Iterable

from sandbox.backend import SandboxProfile
from sandbox.instance import Sandbox
from sandbox.pool.profiles import profile_for_memory

SpareKey = tuple[str, SandboxProfile]  # (tenant, profile)


class Spares:
    def __init__(self, memory_mb: Iterable[int] | None) -> None:
        """One spare per profile of `memory_mb`; None: of the profile a cold start last had."""
        self._profiles = (
            None if memory_mb is None else frozenset(profile_for_memory(mb) for mb in memory_mb)
        )
        self.last_cold: SpareKey | None = None  # the tenant and profile of the last cold start
        self.ready: dict[SpareKey, Sandbox] = {}  # started, never used
        self.starting: set[SpareKey] = set()

    @property
    def count(self) -> int:
        """Spares started or starting: each counts against the pool's cap."""
        return len(self.ready) + len(self.starting)

    def wanted(self) -> frozenset[SpareKey]:
        if self.last_cold is None:
            return frozenset()
        tenant, profile = self.last_cold
        profiles = self._profiles if self._profiles is not None else {profile}
        return frozenset((tenant, p) for p in profiles)

    def take(self, tenant: str, profile: SandboxProfile) -> Sandbox | None:
        """The tenant's spare of this profile for one of its agents, if one is ready: it is
        no longer one."""
        return self.ready.pop((tenant, profile), None)

    def for_room(self) -> Sandbox | None:
        """A spare to tear down for room (spares go before anyone's warm sandbox)."""
        if not self.ready:
            return None
        return self.ready.pop(next(iter(self.ready)))

    def unwanted(self, wanted: frozenset[SpareKey]) -> list[Sandbox]:
        """Take out the ready spares no longer `wanted`, to tear them down."""
        return [self.ready.pop(k) for k in [k for k in self.ready if k not in wanted]]

    def missing(self, wanted: frozenset[SpareKey]) -> frozenset[SpareKey]:
        """The `wanted` spares not ready or starting."""
        return wanted - self.ready.keys() - self.starting

    def drain(self) -> list[Sandbox]:
        """Take out every ready spare (the pool is closing)."""
        ready = list(self.ready.values())
        self.ready.clear()
        return ready

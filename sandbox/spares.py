"""`Spares`: the pre-started sandboxes the warm pool keeps for identities it has not seen.

With `spares`, the pool keeps one pre-started sandbox per chosen profile that belongs to
nobody (it has never served a call); unset, one of the profile a cold start last had. An
identity with no warm sandbox of that profile takes it (its workspace becomes that
identity's; it never returns to being a spare), so its first call skips the start, and a new
spare starts in the background once the call is done. A spare counts against `pool_max`, is
the first torn down when a call needs room, is started only while there is room, is never
reaped as idle, and is torn down with the pool.

This module keeps the books; the pool starts and tears down the sandboxes they name.
"""

from __future__ import annotations

from collections.abc import Iterable

from sandbox.backend import SandboxProfile
from sandbox.instance import Sandbox
from sandbox.profiles import profile_for_memory


class Spares:
    def __init__(self, memory_mb: Iterable[int] | None) -> None:
        """One spare per profile of `memory_mb`; None: of the profile a cold start last had."""
        self._profiles = (
            None if memory_mb is None else frozenset(profile_for_memory(mb) for mb in memory_mb)
        )
        self.last_cold: SandboxProfile | None = None  # the profile a cold start last had
        self.ready: dict[SandboxProfile, Sandbox] = {}  # started, never used
        self.starting: set[SandboxProfile] = set()

    @property
    def count(self) -> int:
        """Spares started or starting: each counts against the pool's cap."""
        return len(self.ready) + len(self.starting)

    def wanted(self) -> frozenset[SandboxProfile]:
        if self._profiles is not None:
            return self._profiles
        return frozenset() if self.last_cold is None else frozenset({self.last_cold})

    def take(self, profile: SandboxProfile) -> Sandbox | None:
        """The spare of this profile for an identity, if one is ready: it is no longer one."""
        return self.ready.pop(profile, None)

    def for_room(self) -> Sandbox | None:
        """A spare to tear down for room (spares go before anyone's warm sandbox)."""
        if not self.ready:
            return None
        return self.ready.pop(next(iter(self.ready)))

    def unwanted(self, wanted: frozenset[SandboxProfile]) -> list[Sandbox]:
        """Take out the ready spares of profiles no longer `wanted`, to tear them down."""
        return [self.ready.pop(p) for p in [p for p in self.ready if p not in wanted]]

    def missing(self, wanted: frozenset[SandboxProfile]) -> frozenset[SandboxProfile]:
        """The `wanted` profiles with no spare ready or starting."""
        return wanted - self.ready.keys() - self.starting

    def drain(self) -> list[Sandbox]:
        """Take out every ready spare (the pool is closing)."""
        ready = list(self.ready.values())
        self.ready.clear()
        return ready

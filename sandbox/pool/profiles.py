"""Which sandbox a call runs in: its limits profile, and the warm pool's key for it.

A sandbox's memory ceiling is the call's limit rounded up to a tier, plus the runner's own,
so calls of nearby limits share warm sandboxes; a tool with network rights runs in sandboxes
of their own (the profile's `egress`). The pool keys its sandboxes by (tenant, agent,
profile): they are never shared across identities.
"""

from __future__ import annotations

from dataclasses import replace

from sandbox.backend import SandboxProfile
from tools.calls import CallLimits

MEMORY_TIERS_MB = (256, 1024, 4096, 16384, 65536)
RUNNER_OVERHEAD_MB = 192
PoolKey = tuple[str, str, SandboxProfile]  # (tenant, agent, profile)
SPARE_AGENT = ""  # the agent of a spare: it belongs to its tenant, to no identity yet


def profile_for(limits: CallLimits, network: bool = False) -> SandboxProfile:
    """The profile of calls limited to `limits`, whose tool has network rights or not."""
    return replace(profile_for_memory(limits.memory_mb), egress=network)


def profile_for_memory(memory_mb: int) -> SandboxProfile:
    """The profile of calls limited to `memory_mb`."""
    tier = next((t for t in MEMORY_TIERS_MB if t >= memory_mb), memory_mb)
    return SandboxProfile(memory_mb=tier + RUNNER_OVERHEAD_MB)

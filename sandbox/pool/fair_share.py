"""`FairShares`: the sandboxes each tenant and agent has in use, against its caps.

Of the sandboxes in use (busy or starting) a tenant holds at most `tenant_max` and an agent
at most `agent_max`, so one tenant's flood cannot take every sandbox. Of those, a tenant may
have at most `tenant_starts_max` starting at once, and begins cold starts no faster than
`tenant_start_rate_per_s` once it spent a burst of its share's worth (`StartTokens`): a cold
start's CPU is spent by the engine, the runtime and the runner's imports, in no tenant's CPU
share, so a tenant cycling calls through more agents than its share (each needing a sandbox
of its own, the last one's evicted for room) would otherwise buy with starts the cores every
other tenant's calls run on.

The pool admits a call only under these caps and its own `pool_max` (`SandboxPool._admit`);
what it admits is a `Grant`, and what it refuses is a `PoolFullError` whose message
(`FairShares.refusal`) names the cap that turned the call away and the setting that raises it.
"""

from __future__ import annotations

import math
import time
from collections import Counter
from dataclasses import dataclass

from sandbox.backend import SandboxError
from sandbox.instance import Sandbox
from sandbox.pool.profiles import PoolKey
from sandbox.sandbox_config import SandboxConfig


class PoolFullError(SandboxError):
    retry_after_ms = 250  # a busy pool frees a sandbox within a call or two


@dataclass
class Grant:
    """A call's admission: a warm sandbox of its key, or leave to start one (after tearing
    down `evicted`, an idle sandbox of anyone that makes room under the global cap)."""

    sandbox: Sandbox | None = None
    evicted: Sandbox | None = None


class StartTokens:
    """Per tenant, the cold starts it may begin now: a bucket of `burst` tokens (a tenant
    warms its whole share at once) that refills at `rate_per_s`; None: no bound."""

    def __init__(self, rate_per_s: float | None, burst: int) -> None:
        self.rate_per_s = rate_per_s
        self.burst = burst
        self._left: dict[str, tuple[float, float]] = {}  # tenant: (tokens, as of when)

    def _now(self, tenant: str) -> float:
        if self.rate_per_s is None:
            return math.inf
        tokens, at = self._left.get(tenant, (float(self.burst), 0.0))
        now = time.monotonic()
        tokens = min(float(self.burst), tokens + (now - at) * self.rate_per_s)
        self._left[tenant] = (tokens, now)
        if tokens >= self.burst:
            del self._left[tenant]  # a full bucket is the default: no entry kept
        return tokens

    def may_take(self, tenant: str) -> bool:
        return self._now(tenant) >= 1.0

    def take(self, tenant: str) -> None:
        tokens = self._now(tenant)
        if tokens != math.inf:
            self._left[tenant] = (tokens - 1.0, time.monotonic())

    def next_in_s(self, tenant: str) -> float:
        """Seconds until the tenant may begin its next start (0: now)."""
        tokens = self._now(tenant)
        if tokens >= 1.0 or self.rate_per_s is None:
            return 0.0
        return (1.0 - tokens) / self.rate_per_s


class FairShares:
    def __init__(self, config: SandboxConfig) -> None:
        """`config`'s `tenant_max`, `agent_max` unset are half and a quarter of `pool_max`
        (at least one); `tenant_starts_max` unset is no cap, as is a start rate of 0."""
        self.config = config
        self.tenant_max = config.tenant_max or max(1, config.pool_max // 2)
        self.agent_max = config.agent_max or max(1, config.pool_max // 4)
        self.tenant_starts_max = config.tenant_starts_max or None
        self.start_tokens = StartTokens(config.tenant_start_rate_per_s or None, self.tenant_max)
        # Sandboxes in use (busy or starting) per tenant and per (tenant, agent).
        self._tenant_in_use: Counter[str] = Counter()
        self._agent_in_use: Counter[tuple[str, str]] = Counter()
        self._tenant_starting: Counter[str] = Counter()  # cold starts per tenant, now
        self._agent_starting: Counter[tuple[str, str]] = Counter()  # ... and per agent
        self.starting = 0  # calls' cold starts, now (the spares' are counted apart)

    def may_use(self, tenant: str, agent: str) -> bool:
        """Whether the tenant and the agent are both under their caps of sandboxes in use."""
        if self._tenant_in_use[tenant] >= self.tenant_max:
            return False
        return self._agent_in_use[(tenant, agent)] < self.agent_max

    def may_start(self, tenant: str) -> bool:
        """Whether the tenant is under its cap of cold starts at once and its start rate (a
        new sandbox for it: a cold start, or a spare it takes, which is started again)."""
        starts_max = self.tenant_starts_max
        if starts_max is not None and self._tenant_starting[tenant] >= starts_max:
            return False
        return self.start_tokens.may_take(tenant)

    def use(self, tenant: str, agent: str) -> None:
        """One more sandbox of this identity is in use."""
        self._tenant_in_use[tenant] += 1
        self._agent_in_use[(tenant, agent)] += 1

    def release(self, tenant: str, agent: str) -> None:
        """One sandbox of this identity is no longer in use."""
        self._tenant_in_use[tenant] -= 1
        self._agent_in_use[(tenant, agent)] -= 1
        # An identity with nothing in use takes no room (drops counts of zero).
        self._tenant_in_use = +self._tenant_in_use
        self._agent_in_use = +self._agent_in_use

    def only_starting(self, tenant: str, agent: str) -> bool:
        """Whether every sandbox the agent has in use (at least one) is still starting: none
        of its calls runs yet, so a hedge of one is racing a call that waits for its start."""
        starting = self._agent_starting[(tenant, agent)]
        return starting > 0 and starting >= self._agent_in_use[(tenant, agent)]

    def start_begun(self, key: PoolKey) -> None:
        """A cold start for this identity and profile begins."""
        self.start_tokens.take(key[0])
        self.starting += 1
        self._tenant_starting[key[0]] += 1
        self._agent_starting[key[:2]] += 1

    def started_or_not(self, key: PoolKey) -> None:
        """A cold start for this identity and profile is over (started, failed or given
        back)."""
        self.starting -= 1
        self._tenant_starting[key[0]] -= 1
        self._tenant_starting = +self._tenant_starting  # drops counts of zero
        self._agent_starting[key[:2]] -= 1
        self._agent_starting = +self._agent_starting

    def in_use_per_tenant(self) -> Counter[str]:
        """Sandboxes in use per tenant (a copy)."""
        return Counter(self._tenant_in_use)

    def tenant_stats(self, idle: Counter[str]) -> dict[str, tuple[int, int, int]]:
        """Per tenant: sandboxes in use, `idle` ones kept warm for it, and agents with one in
        use."""
        agents = Counter(tenant for tenant, _ in self._agent_in_use)
        tenants = set(self._tenant_in_use) | set(idle)
        return {t: (self._tenant_in_use[t], idle[t], agents[t]) for t in sorted(tenants)}

    def refusal(self, tenant: str, agent: str) -> str:
        """Why no sandbox could be had for this identity, and what to do about it."""
        waited = f"after waiting {self.config.queue_ms} ms " if self.config.queue_ms else ""
        if self._tenant_in_use[tenant] >= self.tenant_max:
            return (
                f"tenant {tenant!r} already has its share of {self.tenant_max} sandboxes in "
                f"use {waited}; retry shortly (or raise CONCLAVE_SANDBOX_TENANT_MAX)"
            )
        if self._agent_in_use[(tenant, agent)] >= self.agent_max:
            return (
                f"agent {agent!r} already has its share of {self.agent_max} sandboxes in "
                f"use {waited}; retry shortly (or raise CONCLAVE_SANDBOX_AGENT_MAX)"
            )
        starts_max = self.tenant_starts_max
        if starts_max is not None and self._tenant_starting[tenant] >= starts_max:
            return (
                f"tenant {tenant!r} already has {starts_max} sandboxes starting {waited}; "
                "retry shortly, or keep calls on fewer agents, whose sandboxes stay warm "
                "(or raise CONCLAVE_SANDBOX_TENANT_STARTS_MAX)"
            )
        if not self.start_tokens.may_take(tenant):
            rate = self.start_tokens.rate_per_s
            return (
                f"tenant {tenant!r} started {self.tenant_max} new sandboxes and may start "
                f"{rate:g} more a second {waited}; retry in "
                f"{self.start_tokens.next_in_s(tenant):.1f} s, or keep calls on fewer agents, "
                "whose sandboxes stay warm (or raise CONCLAVE_SANDBOX_TENANT_START_RATE_PER_S)"
            )
        return (
            f"all {self.config.pool_max} sandboxes are busy {waited}; retry shortly "
            "(or raise CONCLAVE_SANDBOX_POOL_MAX)"
        )

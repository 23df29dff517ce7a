"""Admission: everything the gateway checks in Redis before a call starts, in ONE round trip.

One script per request, whatever it asks for: is the caller's token from its agent's current
generation (if not, refuse, and take nothing); then one token from the agent's bucket for the
target and one from its tenant's bucket (a refusal takes from neither), refilled by Redis's
own clock so replicas never disagree; then, for a tool call, what the allocator asked to
read (`CallReads`): the tool's circuit breaker (which may take the half-open probe's lease)
and the latency windows its grant is computed from: each window's version, and its members
only where the estimate the process holds went stale (`estimate_cache`), so what a call
reads does not grow with the tool's history. Before, those were four round trips.
Every key carries the tenant as Redis Cluster hash tag, so the script touches one slot.

A tool call also takes a place among its tenant's calls in flight (`InFlight`), counted in
Redis across every replica: a tenant at `in_flight_max` is refused RATE_LIMITED before it
takes a bucket's token, a sandbox queue slot or a worker thread, and other tenants are not.
The account stage gives the place back (`release`) when the call ends; a place whose replica
died lapses after its hold (the tool's declared timeout and a slack). The set holds at most
`in_flight_max` short members per tenant, so what it costs Redis is bounded by the setting.
`peek` checks the token's generation and the buckets without taking anything: a route asks
it before reading a large body, so a revoked or rate-limited caller's body is never read.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field

from redis.asyncio import Redis

from gateway.budgets.breaker import breaker_key
from gateway.budgets.latency_window import WindowRead, version_key, window_key
from gateway.identity import generation_key
from gateway.redis_io import PooledScript, lua_script

_ADMIT = lua_script("gateway.budgets", "breaker_gate", "admission")


def bucket_key(tenant: str, agent: str, target: str) -> str:
    return f"conclave:rl:{{{tenant}}}:{agent}:{target}"


def tenant_bucket_key(tenant: str) -> str:
    """The tenant's own bucket, shared by all its agents and targets (a name holds no ':')."""
    return f"conclave:rl:{{{tenant}}}::tenant"


def in_flight_key(tenant: str) -> str:
    """The tenant's calls in flight: a sorted set, call id -> when its place lapses."""
    return f"conclave:inflight:{{{tenant}}}"


IN_FLIGHT_RETRY_MS = 250  # suggested to a tenant at its cap: about a short call's length
IN_FLIGHT_SLACK_MS = 60_000  # past a call's declared timeout: its queue wait and answer
IN_FLIGHT_HOLD_MS = 600_000  # a call with no declared timeout (an upstream's tool)


@dataclass(frozen=True)
class InFlight:
    """A tool call's place among its tenant's calls in flight: its id (given back to
    `release`) and how long the place is held should its replica never release it."""

    call_id: str
    hold_ms: int

    @classmethod
    def for_call(cls, declared_timeout_ms: int | None) -> InFlight:
        hold = IN_FLIGHT_HOLD_MS if declared_timeout_ms is None else declared_timeout_ms
        # The id never leaves the gateway: unique among the tenant's places is all it needs,
        # so `random`, not the OS's entropy (a system call on every tool call).
        return cls(f"{random.getrandbits(64):016x}", hold + IN_FLIGHT_SLACK_MS)


@dataclass(frozen=True)
class RateLimit:
    per_s: float
    burst: int


@dataclass(frozen=True)
class CallReads:
    """What the allocator needs read before a call: the breaker to pass (None: no breaker),
    the probe's lease should it be the half-open probe, the latency windows (by name) with
    the age past which their samples no longer count, the estimates the process holds of
    them (`held`: a window's version each was made from, and how far the window may have
    moved past it before its members are read again; every window is read whole when not
    given), and the hedges the caller holds (`hedge_bucket`, for a call that may be
    hedged)."""

    breaker_tool: str | None = None
    probe_ttl_ms: int = 0
    windows: tuple[str, ...] = ()
    window_ms: int = 0
    held: tuple[tuple[int, int], ...] | None = None
    hedge_bucket: str | None = None  # the caller's hedge bucket, to read its tokens


@dataclass(frozen=True)
class AdmissionDecision:
    revoked: bool
    allowed: bool
    retry_after_ms: int
    limited_by: str = ""  # 'agent' or 'tenant' (whose bucket was empty), or 'in_flight'
    breaker_admitted: bool = True
    breaker_wait_ms: int = 0
    breaker_state: str = "closed"
    windows: dict[str, WindowRead] = field(default_factory=dict)  # name -> as read
    hedge_tokens: str | None = None  # the caller's hedge bucket's tokens, when asked for
    now_ms: int = 0  # the clock the breaker and windows were read at
    unknown_agent: bool = False  # the token's agent has no registration in this store


class Admission:
    def __init__(
        self,
        redis: Redis,
        rate_per_s: float,
        burst: int,
        tenant: RateLimit | None = None,
        in_flight_max: int = 0,  # 0: no cap on a tenant's calls in flight
    ) -> None:
        self.rate_per_s = rate_per_s
        self.burst = burst
        self.tenant = tenant
        self.in_flight_max = in_flight_max
        self.redis = redis
        self._admit = PooledScript(redis, _ADMIT.text, name="admission")

    async def admit(
        self,
        tenant: str,
        agent: str,
        generation: int,
        target: str | None,
        reads: CallReads = CallReads(),
        in_flight: InFlight | None = None,
        *,
        peek: bool = False,
    ) -> AdmissionDecision:
        """Check the token's `generation`; given a target, take from the agent's and the
        tenant's buckets; given `in_flight` (and a cap), take a place among the tenant's
        calls in flight; then read what `reads` names. With `peek`, only check the
        generation and the buckets, and take nothing."""
        counted = in_flight is not None and self.in_flight_max > 0 and not peek
        keys: list[str] = []  # the parts, in the script's order
        buckets = 0
        if target is not None:
            keys.append(bucket_key(tenant, agent, target))
            buckets = 1
            if self.tenant is not None:
                keys.append(tenant_bucket_key(tenant))
                buckets = 2
        if counted:
            keys.append(in_flight_key(tenant))
        if reads.hedge_bucket is not None:
            keys.append(reads.hedge_bucket)
        if reads.breaker_tool is not None:
            keys.append(breaker_key(tenant, reads.breaker_tool))
        for name in reads.windows:
            keys += [window_key(tenant, name), version_key(tenant, name)]
        held = reads.held if reads.held is not None else ((0, 0),) * len(reads.windows)
        tenant_limit = self.tenant or RateLimit(self.rate_per_s, self.burst)
        now = int(time.time() * 1000)
        reply = await self._admit(
            keys=_ADMIT.keys(generation=generation_key(tenant, agent), parts=keys),
            args=_ADMIT.argv(
                token_generation=generation, buckets=buckets, agent_rate=self.rate_per_s,
                agent_burst=self.burst, tenant_rate=tenant_limit.per_s,
                tenant_burst=tenant_limit.burst,
                breaker_asked="1" if reads.breaker_tool else "0",
                hedge_asked="1" if reads.hedge_bucket else "0", now_ms=now,
                probe_lease_ms=max(1, reads.probe_ttl_ms), windows_after=now - reads.window_ms,
                held=[n for pair in held for n in pair],
                in_flight_max=self.in_flight_max if counted else 0,
                call_id=in_flight.call_id if in_flight else "",
                hold_ms=in_flight.hold_ms if in_flight else 0,
                in_flight_wait_ms=IN_FLIGHT_RETRY_MS, peek="1" if peek else "0",
            ),
        )  # fmt: skip
        revoked, allowed, wait, limited_by, admitted, breaker_wait, state = reply[:7]
        windows, hedge_tokens = reply[7:], None
        if reads.hedge_bucket is not None and len(windows) > len(reads.windows):
            hedge_tokens = str(windows.pop())  # last, and only for an admitted call
        return AdmissionDecision(
            revoked=int(revoked) == 1,
            unknown_agent=int(revoked) == 2,
            allowed=bool(int(allowed)),
            retry_after_ms=int(wait),
            limited_by=str(limited_by),
            breaker_admitted=bool(int(admitted)),
            breaker_wait_ms=int(breaker_wait),
            breaker_state=str(state),
            windows={
                name: WindowRead(int(read[0]), [str(m) for m in read[2:]] if int(read[1]) else None)
                for name, read in zip(reads.windows, windows, strict=False)
            },
            hedge_tokens=hedge_tokens,
            now_ms=now,
        )

    async def release(self, tenant: str, in_flight: InFlight) -> None:
        """Give back a call's place among its tenant's calls in flight (once it ended)."""
        await self.redis.zrem(in_flight_key(tenant), in_flight.call_id)

"""A circuit breaker per (tenant, tool), in Redis so every replica sees the same state.

Per tenant, so one tenant's failing calls (or its deliberately failing ones) never shut a
tool for another tenant.

Closed: calls pass; consecutive tool failures are counted and any success resets the count.
After `failures` in a row the breaker opens for `cooldown_ms`: calls are refused before they
start with `UPSTREAM_UNAVAILABLE` and a `retry_after_ms` until the cool-down ends. Then it is
half-open: exactly one call (the probe) is let through, across all replicas; the probe's
success closes the breaker, its failure opens it for another cool-down. If a probe never
reports (its gateway died), another probe is allowed once its lease runs out.

What counts as a failure of the *tool* is decided by `counts_against_tool`: only a fault of
the tool or its upstream (its own exception, a timeout with its whole declared time, a
sandbox kill, an unavailable upstream); a caller's bad arguments, a missing file or key, a
refused permission, or a deadline too tight for the tool are not the tool's fault.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Literal

from redis.asyncio import Redis

from gateway.gateway_error import GatewayError
from gateway.redis_io import lua_script
from protocol import ErrorCode, RecoveryAction

KEY_PREFIX = "conclave:breaker:"

_ADMIT = lua_script("gateway.budgets", "breaker_gate", "breaker_admit")
_RECORD = lua_script("gateway.budgets", "record_outcome", "breaker_record")

BreakerStateName = Literal["closed", "open", "half_open"]

_TOOL_FAULTS = frozenset(
    {ErrorCode.TOOL_FAILED, ErrorCode.UPSTREAM_UNAVAILABLE, ErrorCode.SANDBOX_KILLED}
)


def counts_against_tool(code: ErrorCode, *, granted_ms: float, declared_ms: float) -> bool:
    """Whether a failed call is evidence that the tool is unhealthy.

    A timeout counts only when the call had the tool's whole declared timeout: the tool broke
    its own promise. Killing a call that a deadline or the caller's limit cut short says
    nothing about the tool.
    """
    if code is ErrorCode.TOOL_TIMEOUT:
        return granted_ms >= declared_ms
    return code in _TOOL_FAULTS


@dataclass(frozen=True)
class BreakerState:
    state: BreakerStateName
    failures: int
    retry_after_ms: int


def breaker_key(tenant: str, tool: str) -> str:
    return f"{KEY_PREFIX}{{{tenant}}}:{tool}"  # the same hash tag as the tenant's windows


def _now_ms() -> int:
    return int(time.time() * 1000)


class CircuitBreaker:
    def __init__(self, redis: Redis, *, failures: int = 5, cooldown_ms: int = 10_000) -> None:
        self._redis = redis
        self.threshold = failures
        self.cooldown_ms = cooldown_ms
        self._admit = redis.register_script(_ADMIT.text)
        self._record = redis.register_script(_RECORD.text)

    async def admit(
        self,
        tenant: str,
        tool: str,
        *,
        probe_ttl_ms: int,
        remaining_ms: float | None = None,
        now_ms: int | None = None,
    ) -> bool:
        """Let a call through or raise `UPSTREAM_UNAVAILABLE`; True when it is the probe.

        The refusal says `retry_backoff` when the wait fits in the caller's remaining time
        (or there is no deadline), otherwise `switch_tool`.
        """
        now = now_ms if now_ms is not None else _now_ms()
        admitted, wait_ms, state = await self._admit(
            keys=_ADMIT.keys(breaker=breaker_key(tenant, tool)),
            args=_ADMIT.argv(now_ms=now, probe_lease_ms=max(1, probe_ttl_ms)),
        )
        if int(admitted):
            return bool(state == "probe")
        raise self.refusal(tenant, tool, int(wait_ms), str(state), remaining_ms)

    def refusal(
        self, tenant: str, tool: str, wait_ms: int, state: str, remaining_ms: float | None
    ) -> GatewayError:
        """UPSTREAM_UNAVAILABLE for a shut circuit: `retry_backoff` when the wait fits in the
        caller's remaining time (or there is no deadline), otherwise `switch_tool`."""
        fits = remaining_ms is None or wait_ms < remaining_ms
        return GatewayError.of(
            ErrorCode.UPSTREAM_UNAVAILABLE,
            f"tool {tool!r} failed {self.threshold} times in a row for tenant {tenant!r}; its"
            f" circuit is {state} for {wait_ms} ms more: "
            + ("retry after that" if fits else "use another tool, it will not recover in time"),
            retry_after_ms=wait_ms,
            action=RecoveryAction.RETRY_BACKOFF if fits else RecoveryAction.SWITCH_TOOL,
            details={"tool": tool, "tenant": tenant, "breaker": state},
        )

    async def record(
        self, tenant: str, tool: str, *, ok: bool, now_ms: int | None = None
    ) -> BreakerStateName:
        now = now_ms if now_ms is not None else _now_ms()
        state = await self._record(
            keys=_RECORD.keys(breaker=breaker_key(tenant, tool)),
            args=_RECORD.argv(
                now_ms=now,
                healthy="1" if ok else "0",
                failure_threshold=self.threshold,
                cooldown_ms=self.cooldown_ms,
            ),
        )
        return "closed" if state == "closed" else "open"

    async def state(self, tenant: str, tool: str, *, now_ms: int | None = None) -> BreakerState:
        now = now_ms if now_ms is not None else _now_ms()
        fields = await self._redis.hgetall(breaker_key(tenant, tool))
        failures = int(fields.get("failures", 0))
        open_until = int(fields.get("open_until", 0))
        if open_until == 0:
            return BreakerState("closed", failures, 0)
        if now < open_until:
            return BreakerState("open", failures, open_until - now)
        return BreakerState("half_open", failures, 0)

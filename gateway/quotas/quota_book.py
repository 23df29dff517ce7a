"""`QuotaBook`: a call's quotas counted in Redis, exactly across replicas.

`take` counts a call against every limit it matches in one Lua script (`lua/quota_take.lua`),
or against none: the first limit the call would pass refuses it (RATE_LIMITED, 429, with
`retry_after_ms` until the window ends and the quota named in `details`), so under any
concurrency on any number of replicas a limit of N grants exactly N calls in its window.
`charge` adds what a call used (its sandbox CPU) to its day budgets once it ran: a budget is
checked before a call and charged after it, so calls running at once may take it past its
figure by what they use; the next call is refused. `read` is what `GET /v1/quotas` shows.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from redis.asyncio import Redis

from gateway.gateway_error import GatewayError
from gateway.quotas.quota_rules import DAY_MS, CountedLimit, Quotas, counted_limits, matches
from gateway.redis_io import lua_script
from protocol import ErrorCode, Principal, QuotaUse

TAKE = lua_script("gateway.quotas", "quota_take")
CHARGE = lua_script("gateway.quotas", "quota_charge")
READ = lua_script("gateway.quotas", "quota_read")


class QuotaBook:
    def __init__(self, redis: Redis, quotas: Quotas) -> None:
        self.redis = redis
        self.quotas = quotas  # the rules in force
        self._take = redis.register_script(TAKE.text)
        self._charge = redis.register_script(CHARGE.text)
        self._read = redis.register_script(READ.text)

    async def take(self, limits: Sequence[CountedLimit]) -> GatewayError | None:
        """Count a call against `limits`; the refusal naming the first it would pass."""
        answer = await self._take(
            keys=TAKE.keys(counters=[limit.counter for limit in limits]),
            args=TAKE.argv(
                limits=[
                    f"{limit.allowed:g},{limit.window_ms},{0 if limit.charged_after else 1}"
                    for limit in limits
                ]
            ),
        )
        if int(answer[0]) == 0:
            return None
        passed = limits[int(answer[0]) - 1]
        return over_quota(passed, float(answer[1]), int(answer[2]))

    async def charge(self, limits: Sequence[CountedLimit], cpu_ms: float) -> None:
        """Add a call's CPU to the day budgets among `limits`."""
        budgets = [limit.counter for limit in limits if limit.charged_after]
        if budgets and cpu_ms > 0:
            await self._charge(
                keys=CHARGE.keys(counters=budgets),
                args=CHARGE.argv(window_ms=DAY_MS, amount=math.ceil(cpu_ms)),
            )

    async def uses(self, principal: Principal, tools: Sequence[str]) -> list[QuotaUse]:
        """Every quota `principal`'s calls count against, of the `tools` it may call: what
        it used of each limit, and what remains."""
        p = principal
        limits: dict[str, CountedLimit] = {}
        for rule in self.quotas.rules:
            for tool in tools:
                if matches(rule, p.tenant, p.agent, tool):
                    for limit in counted_limits(rule, p.tenant, p.agent, tool):
                        limits.setdefault(limit.counter, limit)  # per tool, or once
        return await self.read(list(limits.values()))

    async def usage(self, principal: Principal, tool: str) -> dict[str, dict[str, float]]:
        """What a call of `tool` by `principal` has used of each quota it counts against, as
        policy rules read it (`usage.<quota>.<limit>`): one read of Redis."""
        found: dict[str, dict[str, float]] = {}
        for use in await self.uses(principal, [tool]):
            found.setdefault(use.quota, {})[use.limit] = use.used
        return found

    async def read(self, limits: Sequence[CountedLimit]) -> list[QuotaUse]:
        """What each of `limits` has used in its current window, and what remains."""
        if not limits:
            return []
        now, *used = await self._read(
            keys=READ.keys(counters=[limit.counter for limit in limits]),
            args=READ.argv(windows=[limit.window_ms for limit in limits]),
        )
        uses = []
        for limit, spent in zip(limits, used, strict=True):
            scale = 1000.0 if limit.charged_after else 1.0  # CPU ms shown as seconds
            taken = float(spent) / scale
            allowed = limit.allowed / scale
            uses.append(
                QuotaUse(
                    quota=limit.rule.name,
                    subject=limit.subject,
                    limit=limit.limit,
                    allowed=allowed,
                    used=round(taken, 3),
                    remaining=round(max(0.0, allowed - taken), 3),
                    resets_at_ms=(int(now) // limit.window_ms + 1) * limit.window_ms,
                )
            )
        return uses


def over_quota(limit: CountedLimit, used: float, retry_after_ms: int) -> GatewayError:
    rule, what = limit.rule, limit.limit
    if limit.charged_after:
        spent = f"{used / 1000:g} of its {limit.allowed / 1000:g} sandbox CPU-seconds today"
    else:
        spent = f"{used:g} of its {limit.allowed:g} calls ({what.replace('calls_', '')})"
    return GatewayError.of(
        ErrorCode.RATE_LIMITED,
        f"quota {rule.name!r} of {limit.subject} has used {spent}: retry in"
        f" {retry_after_ms} ms, when its window ends",
        retry_after_ms=max(1, retry_after_ms),
        details={
            "limited_by": "quota",
            "quota": rule.name,
            "limit": what,
            "subject": limit.subject,
            "allowed": limit.allowed / 1000 if limit.charged_after else limit.allowed,
        },
    )

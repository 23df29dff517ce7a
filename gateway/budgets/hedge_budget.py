"""Each identity's hedge budget, in Redis, so it holds across gateway replicas.

A hedge (a second attempt of an idempotent tool's call, `hedge_rule`) costs a sandbox slot
and the tool's work again; the budget keeps hedging from turning into load. Every finished
tool call of an identity (tenant, agent) earns it `share` of a hedge (default 5%), up to
`cap` hedges held, and each hedge spends one: over any stretch of time an identity hedges at
most `share` of its calls, plus what it held at the start (at most `cap`). A new identity
holds nothing, so a burst of slow calls from it starts no hedge until its calls earned one.

The deposit rides on the account stage's one round trip per call (`OutcomeRecorder`, the
script `lua/outcome.lua` with `lua/hedge_deposit.lua`); `take` is its own script, run only
when a hedge is about to start; `holds` is the allocator's look before it plans a hedge.
The bucket is a hash in the tenant's hash slot, forgotten `ttl_ms` after the last call.
"""

from __future__ import annotations

from dataclasses import dataclass

from redis.asyncio import Redis

from gateway.redis_io import PooledScript, lua_script

UNIT = 1_000_000  # a hedge, in the bucket's integer units
DEFAULT_SHARE = 0.05
DEFAULT_CAP = 2.0
_TAKE = lua_script("gateway.budgets", "hedge_take")


def holds_a_hedge(tokens: str | bytes | None) -> bool:
    """Whether a bucket whose `tokens` field reads so (by `holds`, or by the admission
    script; None: no bucket) holds a hedge."""
    return tokens is not None and int(float(tokens)) >= UNIT


def hedge_key(tenant: str, agent: str) -> str:
    return f"conclave:hedge:{{{tenant}}}:{agent}"


@dataclass(frozen=True)
class HedgeDeposit:
    """What one finished call adds to its identity's bucket, as the outcome script's ARGV."""

    key: str
    share_units: int
    cap_units: int
    ttl_ms: int


class HedgeBudget:
    def __init__(
        self,
        redis: Redis,
        *,
        share: float = DEFAULT_SHARE,
        cap: float = DEFAULT_CAP,
        ttl_ms: int = 3_600_000,
    ) -> None:
        self.redis = redis
        self.share = share
        self.cap = cap
        self.ttl_ms = ttl_ms
        self._take = PooledScript(redis, _TAKE.text, name="hedge_take")

    def deposit(self, tenant: str, agent: str) -> HedgeDeposit:
        return HedgeDeposit(
            hedge_key(tenant, agent),
            round(self.share * UNIT),
            round(self.cap * UNIT),
            self.ttl_ms,
        )

    async def holds(self, tenant: str, agent: str) -> bool:
        """Whether the identity holds a hedge now (it may be spent by the time it starts)."""
        tokens = await self.redis.hget(hedge_key(tenant, agent), "tokens")
        return holds_a_hedge(tokens)

    async def take(self, tenant: str, agent: str) -> bool:
        """Spend one hedge; False when the identity holds none."""
        taken = await self._take(
            keys=_TAKE.keys(bucket=hedge_key(tenant, agent)), args=_TAKE.argv(cost=UNIT)
        )
        return bool(int(taken))

    async def counts(self, tenant: str, agent: str) -> tuple[int, int]:
        """(calls that earned a share, hedges taken), for tests and the console."""
        found = await self.redis.hmget(hedge_key(tenant, agent), ["calls", "hedges"])
        return int(found[0] or 0), int(found[1] or 0)

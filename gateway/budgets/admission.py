"""Admission: the revocation check and the rate limit in ONE Redis round trip.

Every request costs one script call here, whatever it asks for: is the caller's token from
its agent's current generation (if not, refuse, and take nothing from its bucket), and if so,
one token from the (identity x target) bucket, refilled by Redis's own clock so replicas never
disagree about a bucket. Buckets expire once they would be full again. The generation and the
buckets carry the tenant as Redis Cluster hash tag, so the script touches one slot.
"""

from __future__ import annotations

from dataclasses import dataclass

from redis.asyncio import Redis

from gateway.identity import generation_key
from gateway.lua_files import lua_text

_ADMIT = lua_text("gateway.budgets", "admission")


def bucket_key(tenant: str, agent: str, target: str) -> str:
    return f"conclave:rl:{{{tenant}}}:{agent}:{target}"


@dataclass(frozen=True)
class AdmissionDecision:
    revoked: bool
    allowed: bool
    retry_after_ms: int


class Admission:
    def __init__(self, redis: Redis, rate_per_s: float, burst: int) -> None:
        self.rate_per_s = rate_per_s
        self.burst = burst
        self._admit = redis.register_script(_ADMIT)

    async def admit(
        self, tenant: str, agent: str, generation: int, target: str | None
    ) -> AdmissionDecision:
        """Check the token's `generation` and, given a target, take from its bucket."""
        keys = [generation_key(tenant, agent)]
        if target is not None:
            keys.append(bucket_key(tenant, agent, target))
        revoked, allowed, wait = await self._admit(
            keys=keys, args=[generation, self.rate_per_s, self.burst]
        )
        return AdmissionDecision(bool(int(revoked)), bool(int(allowed)), int(wait))

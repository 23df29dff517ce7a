"""Admission: the revocation check and the rate limit in ONE Redis round trip.

Every request costs one script call here, whatever it asks for: is the caller's token older
than its agent's revocation marker (refuse, and take nothing from its bucket), and if not, one
token from the (identity x target) bucket, refilled by Redis's own clock so replicas never
disagree about a bucket. Buckets expire once they would be full again.
"""

from __future__ import annotations

from dataclasses import dataclass

from redis.asyncio import Redis

_ADMIT = """
local marker = redis.call('GET', KEYS[1])
if marker and tonumber(ARGV[1]) <= tonumber(marker) then
  return {1, 0, 0}
end
if #KEYS < 2 then
  return {0, 1, 0}
end
local rate = tonumber(ARGV[2])
local burst = tonumber(ARGV[3])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local state = redis.call('HMGET', KEYS[2], 'tokens', 'at')
local tokens = tonumber(state[1]) or burst
local at = tonumber(state[2]) or now
tokens = math.min(burst, tokens + math.max(0, now - at) * rate / 1000)
local allowed = 0
local wait = 0
if tokens >= 1 then
  tokens = tokens - 1
  allowed = 1
else
  wait = math.ceil((1 - tokens) * 1000 / rate)
end
redis.call('HSET', KEYS[2], 'tokens', tostring(tokens), 'at', now)
redis.call('PEXPIRE', KEYS[2], math.ceil(burst * 1000 / rate) + 1000)
return {0, allowed, wait}
"""


def revocation_key(tenant: str, agent: str) -> str:
    return f"conclave:revoked:{tenant}/{agent}"


def bucket_key(tenant: str, agent: str, target: str) -> str:
    return f"conclave:rl:{tenant}/{agent}:{target}"


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
        self, tenant: str, agent: str, issued_at: int, target: str | None
    ) -> AdmissionDecision:
        """Check the token issued at `issued_at` and, given a target, take from its bucket."""
        keys = [revocation_key(tenant, agent)]
        if target is not None:
            keys.append(bucket_key(tenant, agent, target))
        revoked, allowed, wait = await self._admit(
            keys=keys, args=[issued_at, self.rate_per_s, self.burst]
        )
        return AdmissionDecision(bool(int(revoked)), bool(int(allowed)), int(wait))

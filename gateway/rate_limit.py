"""Token buckets in Redis: one Lua script per check, so every replica shares the same buckets.

The script reads Redis's own clock (replicas' clocks never disagree about a bucket), refills,
takes one token or answers how long until one is there. Buckets expire once full again.
"""

from __future__ import annotations

from dataclasses import dataclass

from redis.asyncio import Redis

_TAKE = """
local rate = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local state = redis.call('HMGET', KEYS[1], 'tokens', 'at')
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
redis.call('HSET', KEYS[1], 'tokens', tostring(tokens), 'at', now)
redis.call('PEXPIRE', KEYS[1], math.ceil(burst * 1000 / rate) + 1000)
return {allowed, wait}
"""


@dataclass(frozen=True)
class RateDecision:
    allowed: bool
    retry_after_ms: int


class RateLimiter:
    def __init__(self, redis: Redis, rate_per_s: float, burst: int) -> None:
        self.rate_per_s = rate_per_s
        self.burst = burst
        self._take = redis.register_script(_TAKE)

    async def take(self, identity: str, target: str) -> RateDecision:
        allowed, wait = await self._take(
            keys=[f"conclave:rl:{{{identity}}}:{target}"], args=[self.rate_per_s, self.burst]
        )
        return RateDecision(bool(int(allowed)), int(wait))

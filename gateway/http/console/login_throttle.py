"""Wrong admin keys at the console's login are throttled per client address (issue 26).

Each wrong key counts against the address it came from, in Redis (so every replica counts
the same); the count lives `console_login_window_s` from the first failure. Past
`console_login_failures` in that window, the address's logins are refused RATE_LIMITED with
`retry_after_ms` (the window's time left) before the key is looked at, the right one
included: a guesser cannot tell a hit from a refusal. A successful login clears the count.
"""

from __future__ import annotations

from redis.asyncio import Redis

from gateway.config import Settings
from gateway.gateway_error import GatewayError
from protocol import ErrorCode


def _failures_key(address: str) -> str:
    return f"conclave:console:login_failures:{address}"


async def refuse_if_throttled(redis: Redis, settings: Settings, address: str) -> None:
    """RATE_LIMITED when `address` is past its wrong keys in this window."""
    key = _failures_key(address)
    async with redis.pipeline(transaction=False) as pipe:
        pipe.get(key)
        pipe.pttl(key)
        failures, ttl_ms = await pipe.execute()
    if int(failures or 0) < settings.console_login_failures:
        return
    raise GatewayError.of(
        ErrorCode.RATE_LIMITED,
        f"{settings.console_login_failures} wrong admin keys from this address: logins from it"
        " are refused for a while",
        retry_after_ms=max(int(ttl_ms), 1),
    )


async def count_failure(redis: Redis, settings: Settings, address: str) -> None:
    key = _failures_key(address)
    async with redis.pipeline(transaction=True) as pipe:
        # The window starts at the first failure (SET NX; INCR keeps the expiry): EXPIRE NX
        # would need Redis 7, and the embedded one is older.
        pipe.set(key, 0, ex=settings.console_login_window_s, nx=True)
        pipe.incr(key)
        await pipe.execute()


async def clear_failures(redis: Redis, address: str) -> None:
    await redis.delete(_failures_key(address))

"""`logging/setLevel` at `/mcp`: the log level each caller asked for, kept in Redis.

The level is the caller's identity's (tenant, agent), not a connection's or a replica's: a
`logging/setLevel` answered by one replica applies to the calls any replica runs
(docs/architecture.md, "One MCP request": nothing per connection). A call's log messages (its
tool's, its MCP server's) below the level are not sent to the caller. Until a caller sets one,
`DEFAULT_LEVEL` applies. One key per identity, `conclave:mcp:loglevel:{<tenant>}:<agent>`, kept
`KEEP_S` after its last setting; a caller's calls read it once, at their first log message.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from redis.asyncio import Redis
from redis.exceptions import RedisError

from gateway.gateway_error import GatewayError
from gateway.pipeline import RequestContext
from protocol import ErrorCode, LogLevel, Principal

SET_LEVEL_METHOD = "logging/setLevel"
DEFAULT_LEVEL = LogLevel.INFO
KEEP_S = 30 * 24 * 3600


def level_key(principal: Principal) -> str:
    return f"conclave:mcp:loglevel:{{{principal.tenant}}}:{principal.agent}"


class LogLevels:
    def __init__(self, redis: Redis) -> None:
        self.redis = redis

    async def level_of(self, principal: Principal) -> LogLevel:
        """The lowest level of the messages `principal`'s calls are sent."""
        try:
            raw = await self.redis.get(level_key(principal))
        except (RedisError, OSError):
            return DEFAULT_LEVEL  # a filter on what is shown must not fail the call
        if raw is None:
            return DEFAULT_LEVEL
        try:
            return LogLevel(raw.decode() if isinstance(raw, bytes) else str(raw))
        except ValueError:
            return DEFAULT_LEVEL

    async def set_level(self, principal: Principal, level: LogLevel) -> None:
        await self.redis.set(level_key(principal), level.value, ex=KEEP_S)

    def action(
        self, params: dict[str, Any]
    ) -> Callable[[RequestContext], Awaitable[dict[str, Any]]]:
        """The pipeline action of a `logging/setLevel` with `params`."""
        asked = params.get("level")

        async def set_level(ctx: RequestContext) -> dict[str, Any]:
            try:
                level = LogLevel(asked) if isinstance(asked, str) else None
            except ValueError:
                level = None
            if level is None:
                levels = ", ".join(level.value for level in LogLevel)
                raise GatewayError.of(
                    ErrorCode.INVALID_REQUEST,
                    f"logging/setLevel needs params.level, one of {levels}",
                    param_hints={"level": f"one of {levels}"},
                )
            await self.set_level(ctx.require_principal(), level)
            return {}

        return set_level


__all__ = ["DEFAULT_LEVEL", "SET_LEVEL_METHOD", "LogLevels", "level_key"]

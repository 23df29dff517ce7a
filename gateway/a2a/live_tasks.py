"""`LiveTasks`: each tenant's delegated tasks live at once (hosted A2A tasks its agents
created and that have not ended), bounded by `a2a_tenant_tasks_max` across every replica, so
one tenant's fan-out cannot fill the agents' queues and workers that every tenant shares.

Key: ``conclave:a2a-live:{t:<tenant>}``, a zset of task refs ("agent/task id") scored by when
the place is given back at the latest (the caller's deadline, or the agent's `timeout_s`). A
task is admitted in one script (`lua/live_task_admit.lua`), before it is created; a refusal is
RATE_LIMITED, to retry once one of the tenant's tasks ended. A task's end gives its place back.
"""

from __future__ import annotations

import time

from redis.asyncio import Redis

from gateway.gateway_error import GatewayError
from gateway.redis_io import lua_script
from protocol import ErrorCode

_ADMIT = lua_script("gateway.a2a", "live_task_admit")
RETRY_AFTER_MS = 1000  # a delegated task takes seconds: sooner is seldom worth asking


def _live_key(tenant: str) -> str:
    return f"conclave:a2a-live:{{t:{tenant}}}"


class LiveTasks:
    def __init__(self, redis: Redis, tenant_max: int, ttl_s: int) -> None:
        self.redis = redis
        self.tenant_max = tenant_max  # 0: no bound
        self.ttl_s = ttl_s
        self._admit = redis.register_script(_ADMIT.text)

    async def admit(self, tenant: str, ref: str, until_ms: int) -> None:
        """Count task `ref` among `tenant`'s live ones until it ends (or `until_ms`);
        RATE_LIMITED when the tenant has `tenant_max` live already."""
        if self.tenant_max <= 0:
            return
        admitted, count = await self._admit(
            keys=_ADMIT.keys(live=_live_key(tenant)),
            args=_ADMIT.argv(
                ref=ref,
                now_ms=int(time.time() * 1000),
                until_ms=until_ms,
                max=self.tenant_max,
                ttl_s=self.ttl_s,
            ),
        )
        if not admitted:
            raise GatewayError.of(
                ErrorCode.RATE_LIMITED,
                f"tenant {tenant!r} has {count} delegated A2A tasks running, its bound"
                f" (CONCLAVE_A2A_TENANT_TASKS_MAX={self.tenant_max}): retry once one of them"
                " has ended, or cancel one you no longer need",
                retry_after_ms=RETRY_AFTER_MS,
                details={"live_tasks": int(count), "bound": self.tenant_max},
            )

    async def release(self, tenant: str, ref: str) -> None:
        """Task `ref` of `tenant` ended: its place goes back."""
        if self.tenant_max > 0:
            await self.redis.zrem(_live_key(tenant), ref)

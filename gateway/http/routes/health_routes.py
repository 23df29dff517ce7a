"""Liveness and readiness.

`/readyz` is a SERF 503 when Redis does not answer, and when it answers but refuses writes:
over its `maxmemory` (policy noeviction), a failed append-only-file write or background save
(Redis stops taking writes then), or a read-only replica. These come from one `INFO` per
probe, so a probe writes nothing and costs Redis microseconds; on a Redis Cluster each master
is asked.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from redis.asyncio.cluster import RedisCluster

from gateway.gateway_error import GatewayError
from gateway.http.gateway_parts import gateway_parts
from protocol import ErrorCode

router = APIRouter(tags=["health"])


@router.get("/healthz")
async def healthz() -> dict[str, str]:
    return {"status": "ok"}


@router.get("/readyz")
async def readyz(request: Request) -> dict[str, Any]:
    redis = gateway_parts(request.app).redis
    # Connection errors become STATE_UNAVAILABLE (gateway_error.translate).
    if isinstance(redis, RedisCluster):
        answers = await redis.info(target_nodes=RedisCluster.PRIMARIES)
        infos = list(answers.values()) if "used_memory" not in answers else [answers]
    else:
        infos = [await redis.info()]
    for info in infos:
        refusal = write_refusal(info)
        if refusal:
            raise GatewayError.of(
                ErrorCode.STATE_UNAVAILABLE,
                f"Redis refuses writes: {refusal}",
                retry_after_ms=1000,
                details={"redis": refusal},
            )
    return {"status": "ready", "redis": "ok", "sandbox": gateway_parts(request.app).sandbox_name}


def write_refusal(info: dict[str, Any]) -> str | None:
    """Why a Redis whose `INFO` is `info` refuses writes, or None if it takes them."""
    used, limit = int(info.get("used_memory", 0)), int(info.get("maxmemory", 0))
    if limit and used >= limit and info.get("maxmemory_policy", "noeviction") == "noeviction":
        return (
            f"it uses {used} bytes of its maxmemory of {limit} (policy noeviction): free "
            "memory (delete state, revoke the tenant filling it) or raise maxmemory"
        )
    if info.get("aof_enabled") and info.get("aof_last_write_status", "ok") != "ok":
        return "its last append-only-file write failed: check the disk it writes to"
    if info.get("rdb_last_bgsave_status", "ok") != "ok":
        return "its last background save failed: check the disk it writes to"
    if info.get("role") == "slave":
        return "it is a read-only replica: point the gateway at the master"
    return None

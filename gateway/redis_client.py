"""The gateway's one Redis connection pool."""

from __future__ import annotations

from redis.asyncio import Redis


def connect_redis(url: str) -> Redis:
    """A pooled asyncio client for redis://, rediss:// or unix:// URLs, decoding to str."""
    return Redis.from_url(url, decode_responses=True, health_check_interval=30)

"""Talking to Redis: the client (standalone or cluster, MOVED retried), the coalesced
connection the hot path shares, and the loader of the Lua scripts."""

from gateway.redis_io.channel_listener import listen_channel
from gateway.redis_io.client import PooledScript, ReplicaWait, connect_redis
from gateway.redis_io.lua_files import lua_text

__all__ = [
    "PooledScript",
    "ReplicaWait",
    "connect_redis",
    "listen_channel",
    "lua_text",
]

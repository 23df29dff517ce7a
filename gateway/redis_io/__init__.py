"""Talking to Redis: the client (standalone or cluster, MOVED retried), the coalesced
connection the hot path shares, and the loader of the Lua scripts."""

from gateway.redis_io.client import PooledScript, ReplicaWait, connect_redis
from gateway.redis_io.lua_files import (
    LuaScript,
    ScriptArguments,
    ScriptArgumentsError,
    lua_script,
    lua_text,
)

__all__ = [
    "LuaScript",
    "PooledScript",
    "ReplicaWait",
    "ScriptArguments",
    "ScriptArgumentsError",
    "connect_redis",
    "lua_script",
    "lua_text",
]

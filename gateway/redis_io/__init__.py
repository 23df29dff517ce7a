"""Talking to Redis: the client (standalone or cluster, MOVED retried), the coalesced
connection the hot path shares, the loader of the Lua scripts, and the loop that reads a
pub/sub channel for good."""

from gateway.redis_io.channel_listener import listen_to_channel
from gateway.redis_io.coalesced_connection import run_commands
from gateway.redis_io.lua_files import (
    LuaScript,
    ScriptArguments,
    ScriptArgumentsError,
    lua_library,
    lua_script,
    lua_text,
)
from gateway.redis_io.redis_client import PooledScript, ReplicaWait, connect_redis

__all__ = [
    "LuaScript",
    "PooledScript",
    "ReplicaWait",
    "ScriptArguments",
    "ScriptArgumentsError",
    "connect_redis",
    "listen_to_channel",
    "lua_library",
    "lua_script",
    "lua_text",
    "run_commands",
]

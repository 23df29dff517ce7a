"""The Lua scripts that perform every state mutation, loaded once per Redis client.

Each script is registered with redis-py's `register_script`, which runs it by EVALSHA and
loads it again by itself when the server answers NOSCRIPT (after a restart, for example).
The script texts live next to this module in `lua/`, one file per operation, read by the
gateway's one Lua loader (`gateway.lua_files`).
"""

from __future__ import annotations

from dataclasses import dataclass

from redis.asyncio import Redis
from redis.commands.core import AsyncScript

from gateway.lua_files import lua_text


@dataclass(frozen=True)
class StateScripts:
    read: AsyncScript
    commit: AsyncScript
    acquire: AsyncScript
    release: AsyncScript
    create_namespace: AsyncScript

    @classmethod
    def register(cls, redis: Redis) -> StateScripts:
        return cls(
            read=redis.register_script(lua_text("gateway.state", "read")),
            commit=redis.register_script(lua_text("gateway.state", "state_ops", "commit")),
            acquire=redis.register_script(lua_text("gateway.state", "acquire")),
            release=redis.register_script(lua_text("gateway.state", "release")),
            create_namespace=redis.register_script(lua_text("gateway.state", "namespace")),
        )

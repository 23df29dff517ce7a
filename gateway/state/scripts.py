"""The Lua scripts that perform every state mutation, loaded once per Redis client.

Each script is registered with redis-py's `register_script`, which runs it by EVALSHA and
loads it again by itself when the server answers NOSCRIPT (after a restart, for example).
The commit and the lease grant are `PooledScript`s instead (EVALSHA, then EVAL on NOSCRIPT,
too), because under durability "replicated" their Redis `WAIT` must run on the connection
that ran them: `wait` is that (replicas, timeout_ms), None in durability "async".
The script texts live next to this module in `lua/`, one file per operation, read by the
gateway's one Lua loader (`gateway.redis_io.lua_files`).
"""

from __future__ import annotations

from dataclasses import dataclass

from redis.asyncio import Redis
from redis.commands.core import AsyncScript

from gateway.redis_io import PooledScript, ReplicaWait, lua_text

# The files each composed script is made of, in order: shared functions first.
READ_SCRIPT = ("gateway.state", "tenant_bytes", "read")
COMMIT_SCRIPT = ("gateway.state", "state_ops", "tenant_bytes", "commit")
ACQUIRE_SCRIPT = ("gateway.state", "tenant_bytes", "acquire")
NAMESPACE_SCRIPT = ("gateway.state", "tenant_bytes", "namespace")


@dataclass(frozen=True)
class StateScripts:
    read: AsyncScript
    commit: PooledScript
    acquire: PooledScript
    release: AsyncScript
    create_namespace: AsyncScript
    wait: ReplicaWait | None = None

    @classmethod
    def register(cls, redis: Redis, wait: ReplicaWait | None = None) -> StateScripts:
        return cls(
            read=redis.register_script(lua_text(*READ_SCRIPT)),
            commit=PooledScript(redis, lua_text(*COMMIT_SCRIPT), name="commit"),
            acquire=PooledScript(redis, lua_text(*ACQUIRE_SCRIPT), name="acquire"),
            release=redis.register_script(lua_text("gateway.state", "release")),
            create_namespace=redis.register_script(lua_text(*NAMESPACE_SCRIPT)),
            wait=wait,
        )

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

from gateway.redis_io import PooledScript, ReplicaWait, lua_script

# The files each composed script is made of, in order: shared functions first.
READ_SCRIPT = ("gateway.state", "tenant_bytes", "read")
COMMIT_SCRIPT = ("gateway.state", "state_ops", "tenant_bytes", "commit")
ACQUIRE_SCRIPT = ("gateway.state", "tenant_bytes", "acquire")
NAMESPACE_SCRIPT = ("gateway.state", "tenant_bytes", "namespace")
# Each script's text and its declared arguments: callers lay out KEYS and ARGV by name.
READ = lua_script(*READ_SCRIPT)
COMMIT = lua_script(*COMMIT_SCRIPT)
ACQUIRE = lua_script(*ACQUIRE_SCRIPT)
RELEASE = lua_script("gateway.state", "release")
NAMESPACE = lua_script(*NAMESPACE_SCRIPT)


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
            read=redis.register_script(READ.text),
            commit=PooledScript(redis, COMMIT.text, name="commit"),
            acquire=PooledScript(redis, ACQUIRE.text, name="acquire"),
            release=redis.register_script(RELEASE.text),
            create_namespace=redis.register_script(NAMESPACE.text),
            wait=wait,
        )

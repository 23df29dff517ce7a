"""The Lua scripts that perform every state mutation, loaded once per Redis client.

Each script is registered with redis-py's `register_script`, which runs it by EVALSHA and
loads it again by itself when the server answers NOSCRIPT (after a restart, for example).
The script texts live next to this module in `lua/`, one file per operation.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources

from redis.asyncio import Redis
from redis.commands.core import AsyncScript


def script_text(name: str) -> str:
    return resources.files("gateway.state").joinpath("lua", f"{name}.lua").read_text("utf-8")


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
            read=redis.register_script(script_text("read")),
            commit=redis.register_script(script_text("commit")),
            acquire=redis.register_script(script_text("acquire")),
            release=redis.register_script(script_text("release")),
            create_namespace=redis.register_script(script_text("namespace")),
        )

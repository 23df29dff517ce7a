"""The two baselines of the contention suite, straight on Redis, without the gateway.

- `NaiveStore`: last-writer-wins, what shared state looks like without ownership: reads and
  writes without any check. It records a history in the same stream layout as the real
  store (the versions it read as its read set, the versions its writes produced), so the
  history checker can show the anomalies it lets through.
- `watch_multi_transaction`: raw optimistic locking with WATCH/MULTI/EXEC from a Python
  client, correct but with no ownership, read log or history: the speed reference.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, cast

from redis.asyncio import Redis
from redis.exceptions import WatchError

from gateway.state import NamespaceKeys


class NaiveStore:
    def __init__(self, redis: Redis, keys: NamespaceKeys) -> None:
        self.redis = redis
        self.keys = keys

    async def read(self, key: str) -> tuple[Any, int]:
        raw, version = cast(
            list[str | None], await self.redis.hmget(self.keys.data(key), ["val", "ver"])
        )
        return (json.loads(raw) if raw else None), int(version or 0)

    async def commit(
        self, agent: str, session: str, writes: dict[str, Any], read_set: dict[str, int]
    ) -> str:
        """Write blindly, then log what happened: two round trips, nothing checked."""
        async with self.redis.pipeline(transaction=False) as pipe:
            for key, value in writes.items():
                pipe.hset(self.keys.data(key), "val", json.dumps(value))
                pipe.hincrby(self.keys.data(key), "ver", 1)
            replies = await pipe.execute()
        new_versions = [int(v) for v in replies[1::2]]
        changed = {k: (v - 1, v) for k, v in zip(writes, new_versions, strict=True)}
        entry_id = await self.redis.xadd(
            self.keys.history,
            {
                "agent": agent,
                "session": session,
                "time": "0",
                "keys": json.dumps(changed),
                "reads": json.dumps(read_set),
                "values": json.dumps(writes),
            },
        )
        return str(entry_id)


Compute = Callable[[dict[str, Any]], dict[str, Any]]


async def watch_multi_transaction(
    redis: Redis,
    keys: NamespaceKeys,
    read: Sequence[str],
    compute: Compute,
    backoff: Callable[[], Awaitable[None]] | None = None,
) -> int:
    """Read `read`, write `compute(values)`, retrying on WatchError (after awaiting `backoff`,
    when given); returns the retries."""
    data_keys = [keys.data(k) for k in read]
    retries = 0
    async with redis.pipeline(transaction=True) as pipe:
        while True:
            try:
                await pipe.watch(*data_keys)
                values: dict[str, Any] = {}
                for name, data_key in zip(read, data_keys, strict=True):
                    raw = await pipe.hget(data_key, "val")
                    values[name] = json.loads(raw) if raw else None
                writes = compute(values)
                pipe.multi()  # type: ignore[no-untyped-call]
                for name, value in writes.items():
                    pipe.hset(keys.data(name), "val", json.dumps(value))
                    pipe.hincrby(keys.data(name), "ver", 1)
                await pipe.execute()
                return retries
            except WatchError:
                retries += 1
                if backoff is not None:
                    await backoff()

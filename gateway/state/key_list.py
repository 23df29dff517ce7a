"""The keys of a namespace (`GET /v1/state/{ns}/keys`): names and versions, in name order.

A key is listed once it has been written (version 1 or more); a lease on a key never written
does not make it one. Listing reads no value, so it is not logged as a read of anything and
a later commit is not checked against it.

Redis keeps no index of a namespace's keys: they are found by `SCAN` over the namespace's
prefix, then sorted, then cut into pages of at most `limit` names after `after`. What one
listing holds is bounded by the tenant's key quota (`state_quota_keys`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from redis.asyncio import Redis

from gateway.state.keys import NamespaceKeys

_GLOB_SPECIAL = re.compile(r"([*?\[\]\\])")  # escaped, so a name matches only itself


@dataclass(frozen=True)
class KeyListing:
    """One page: (key, version) pairs in name order, and the name the next page starts after
    (None: this was the last page)."""

    keys: list[tuple[str, int]]
    next_after: str | None


async def list_keys(
    redis: Redis, keys: NamespaceKeys, *, after: str | None = None, limit: int = 100
) -> KeyListing:
    data_prefix = keys.data("")
    match = _GLOB_SPECIAL.sub(r"\\\1", data_prefix) + "*"
    names = sorted(
        {
            _text(found)[len(data_prefix) :]
            async for found in redis.scan_iter(match=match, count=1000)
        }
    )
    if after is not None:
        names = [name for name in names if name > after]
    listed: list[tuple[str, int]] = []
    for start in range(0, len(names), limit):  # unwritten keys (a lease only) are skipped
        batch = names[start : start + limit]
        async with redis.pipeline(transaction=False) as pipe:
            for name in batch:
                pipe.hget(keys.data(name), "ver")
            versions = await pipe.execute()
        for name, version in zip(batch, versions, strict=True):
            if version is not None and int(version) > 0:
                listed.append((name, int(version)))
                if len(listed) == limit:
                    more = name != names[-1]
                    return KeyListing(listed, name if more else None)
    return KeyListing(listed, None)


def _text(found: str | bytes) -> str:
    return found.decode() if isinstance(found, bytes) else found

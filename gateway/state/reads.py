"""Reads through the gateway, each one logged as key -> version for (session, agent).

The read and its log entry are one script, so the version logged is exactly the version
returned. A key that does not exist reads as version 0 with value null, and that is logged
too: a commit that relied on the key's absence is refused if someone created it meanwhile.
A session's read log holds at most `max_log` distinct keys (every commit checks them all): a
read of one more key (or a commit whose writes would log more) is refused 400
`INVALID_REQUEST`, and nothing is read, logged or written. A read log's bytes count in its
tenant's byte quota: a read that would log a new key over the quota (or into the reserve Redis
keeps below its maxmemory) is refused 507 `STATE_QUOTA_EXCEEDED`, nothing read or logged.

`peek_key` is an operator's read (the admin key's): the same answer, logged nowhere, so it
changes no agent's read log and costs no tenant any quota.
"""

from __future__ import annotations

import json
import time
from typing import cast

from redis.asyncio import Redis

from gateway.state.keys import Actor, NamespaceKeys, check_key
from gateway.state.limits import StateLimits
from gateway.state.refusals import (
    namespace_not_found,
    read_log_full,
    read_log_over_quota,
    store_full,
)
from gateway.state.scripts import READ, StateScripts
from protocol import ReadResult


async def read_key(
    scripts: StateScripts,
    keys: NamespaceKeys,
    actor: Actor,
    key: str,
    limits: StateLimits,
) -> ReadResult:
    log_ttl_s, max_log = limits.read_log_ttl_s, limits.max_read_log
    reply = await scripts.read(
        keys=READ.keys(
            cfg=keys.config,
            data=keys.data(key),
            read_log=keys.read_log(actor.agent, actor.session),
            usage=keys.usage,
            ledger=keys.expiring,
            sizes=keys.expiring_bytes,
        ),
        args=READ.argv(
            key=key,
            read_log_ttl_s=log_ttl_s,
            read_log_max=max_log,
            quota_bytes=limits.quota_bytes,
            reserve_bytes=limits.store_reserve_bytes,
        ),
    )
    if reply[0] == "NSNF":
        raise namespace_not_found(keys.namespace)
    if reply[0] == "LOG_FULL":
        raise read_log_full(actor.session, int(reply[1]), max_log)
    if reply[0] == "QUOTA":
        raise read_log_over_quota(actor.tenant, int(reply[1]), int(reply[2]), limits.quota_bytes)
    if reply[0] == "STORE_FULL":
        raise store_full(actor.tenant, int(reply[1]), int(reply[2]), int(reply[3]))
    _, raw, version, owner, lease_expiry = reply
    return ReadResult(
        namespace=keys.namespace,
        key=key,
        value=json.loads(raw) if raw else None,
        version=int(version),
        owner=owner or None,
        lease_expires_at_ms=int(lease_expiry) or None,
    )


async def peek_key(redis: Redis, keys: NamespaceKeys, key: str) -> ReadResult:
    """`key` as an agent would read it, without logging the read anywhere."""
    check_key(key)
    # One slot (the tenant's hash tag), so one transaction: the namespace and its key at once.
    async with redis.pipeline(transaction=True) as pipe:
        pipe.exists(keys.config)
        pipe.hmget(keys.data(key), "val", "ver", "owner", "lexp")
        exists, fields = await pipe.execute()
    if not exists:
        raise namespace_not_found(keys.namespace)
    raw, version, owner, lease_expiry = cast(list[str | None], fields)
    expiry = int(lease_expiry or 0)
    leased = bool(owner) and expiry > time.time() * 1000
    return ReadResult(
        namespace=keys.namespace,
        key=key,
        value=json.loads(raw) if raw else None,
        version=int(version or 0),
        owner=owner if leased else None,
        lease_expires_at_ms=expiry if leased else None,
    )

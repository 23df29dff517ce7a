"""Leases: exclusive, TTL-bound, renewable ownership of keys, with per-key fencing tokens.

Acquiring is all or none: if any key is held by another agent, nothing is granted and the
409 `LEASE_HELD` lists each held key with its owner and expiry. The current owner acquiring
again renews (same fencing token, new expiry). A new grant, or a takeover of a lapsed lease,
increments the key's fencing token, so a write by the previous owner is refused as `FENCED`.

Under durability "replicated" a grant is acknowledged only once `WAIT` confirms a replica
holds it (its fencing token cannot be issued again by a promoted replica), else 503
`DURABILITY_UNCONFIRMED`. Retrying is safe: if the first grant was kept, the retry renews it
(the same fencing token, now confirmed); if it was lost, the retry grants afresh. The caller
never saw the unconfirmed token, so nobody writes with it.

A lease on a key with no data hash yet creates one, which stays (it keeps the fencing token):
its bytes count in the tenant's byte quota, and a grant over the quota (or into the reserve
Redis keeps below its maxmemory) is refused whole, 507 `STATE_QUOTA_EXCEEDED`.
"""

from __future__ import annotations

import json

from gateway.state.keys import Actor, NamespaceKeys
from gateway.state.limits import StateLimits
from gateway.state.refusals import (
    conflict,
    conflict_from_script,
    leases_over_quota,
    namespace_not_found,
    store_full,
)
from gateway.state.scripts import ACQUIRE, RELEASE, StateScripts
from protocol import ErrorCode, LeaseGrant, LeaseGrants


async def acquire_leases(
    scripts: StateScripts,
    keys: NamespaceKeys,
    actor: Actor,
    names: list[str],
    ttl_ms: int,
    limits: StateLimits,
) -> LeaseGrants:
    unique = list(dict.fromkeys(names))  # a key listed twice is one lease
    reply = await scripts.acquire(
        ACQUIRE.keys(cfg=keys.config, usage=keys.usage, data=[keys.data(k) for k in unique]),
        ACQUIRE.argv(
            agent=actor.agent,
            ttl_ms=ttl_ms,
            quota_bytes=limits.quota_bytes,
            reserve_bytes=limits.store_reserve_bytes,
            names=unique,
        ),
        wait=scripts.wait,
    )
    if reply[0] == "NSNF":
        raise namespace_not_found(keys.namespace)
    if reply[0] == "LEASE_HELD":
        raise conflict_from_script("LEASE_HELD", reply[1])
    if reply[0] == "QUOTA":
        raise leases_over_quota(actor.tenant, int(reply[1]), int(reply[2]), limits.quota_bytes)
    if reply[0] == "STORE_FULL":
        raise store_full(actor.tenant, int(reply[1]), int(reply[2]), int(reply[3]))
    return LeaseGrants(leases=[LeaseGrant.model_validate(g) for g in json.loads(reply[1])])


async def release_lease(
    scripts: StateScripts, keys: NamespaceKeys, actor: Actor, name: str
) -> None:
    reply = await scripts.release(
        keys=RELEASE.keys(cfg=keys.config, data=keys.data(name)),
        args=RELEASE.argv(agent=actor.agent),
    )
    if reply[0] == "NSNF":
        raise namespace_not_found(keys.namespace)
    if reply[0] == "LEASE_HELD":
        _, owner, expiry, version = reply
        raise conflict(
            ErrorCode.LEASE_HELD,
            [
                {
                    "key": name,
                    "reason": "only the owner may release a lease",
                    "owner": owner,
                    "lease_expires_at_ms": int(expiry),
                    "current_version": int(version),
                }
            ],
        )

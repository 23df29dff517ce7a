"""Reads through the gateway, each one logged as key -> version for (session, agent).

The read and its log entry are one script, so the version logged is exactly the version
returned. A key that does not exist reads as version 0 with value null, and that is logged
too: a commit that relied on the key's absence is refused if someone created it meanwhile.
A session's read log holds at most `max_log` distinct keys (every commit checks them all): a
read of one more key (or a commit whose writes would log more) is refused 400
`INVALID_REQUEST`, and nothing is read, logged or written.
"""

from __future__ import annotations

import json

from gateway.state.keys import Actor, NamespaceKeys
from gateway.state.refusals import namespace_not_found, read_log_full
from gateway.state.scripts import StateScripts
from protocol import ReadResult


async def read_key(
    scripts: StateScripts,
    keys: NamespaceKeys,
    actor: Actor,
    key: str,
    *,
    log_ttl_s: int,
    max_log: int,
) -> ReadResult:
    reply = await scripts.read(
        keys=[keys.config, keys.data(key), keys.read_log(actor.agent, actor.session)],
        args=[key, log_ttl_s, max_log],
    )
    if reply[0] == "NSNF":
        raise namespace_not_found(keys.namespace)
    if reply[0] == "LOG_FULL":
        raise read_log_full(actor.session, int(reply[1]), max_log)
    _, raw, version, owner, lease_expiry = reply
    return ReadResult(
        namespace=keys.namespace,
        key=key,
        value=json.loads(raw) if raw else None,
        version=int(version),
        owner=owner or None,
        lease_expires_at_ms=int(lease_expiry) or None,
    )

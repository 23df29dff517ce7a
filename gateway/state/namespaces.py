"""Namespaces: created once with their config (mode, read validation), then used by key.

Creating the same namespace again with the same config is a no-op, so agents of a team may
all "ensure" it at start-up; another config is a 409 `STATE_CONFLICT` (a namespace's rules do
not change under running agents). A new namespace's config counts in its tenant's byte quota
for good: one over the quota is refused 507 `STATE_QUOTA_EXCEEDED`.
"""

from __future__ import annotations

from typing import cast

from redis.asyncio import Redis

from gateway.gateway_error import GatewayError
from gateway.state.keys import NamespaceKeys
from gateway.state.limits import StateLimits
from gateway.state.refusals import namespace_not_found, namespace_over_quota, store_full
from gateway.state.scripts import NAMESPACE, StateScripts
from protocol import ErrorCode, NamespaceConfig, NamespaceMode


def _flag(on: bool) -> str:
    return "1" if on else "0"


async def create_namespace(
    scripts: StateScripts, keys: NamespaceKeys, config: NamespaceConfig, limits: StateLimits
) -> bool:
    """Create the namespace; True if it was new, False if it existed with this config."""
    reply = await scripts.create_namespace(
        keys=NAMESPACE.keys(cfg=keys.config, usage=keys.usage),
        args=NAMESPACE.argv(
            mode=config.mode.value,
            validate_reads=_flag(config.validate_reads),
            quota_bytes=limits.quota_bytes,
            reserve_bytes=limits.store_reserve_bytes,
        ),
    )
    if reply[0] == "QUOTA":
        raise namespace_over_quota(keys.tenant, int(reply[1]), int(reply[2]), limits.quota_bytes)
    if reply[0] == "STORE_FULL":
        raise store_full(keys.tenant, int(reply[1]), int(reply[2]), int(reply[3]))
    if reply[0] == "CREATED":
        return True
    if reply[0] == "EXISTS":
        return False
    existing = NamespaceConfig(mode=NamespaceMode(reply[1]), validate_reads=reply[2] == "1")
    raise GatewayError.of(
        ErrorCode.STATE_CONFLICT,
        f"namespace {keys.namespace!r} exists with another config "
        f"({existing.model_dump_json()}); use it as it is, or pick another name",
        details={"existing": existing.model_dump(mode="json")},
    )


async def load_namespace(redis: Redis, keys: NamespaceKeys) -> NamespaceConfig:
    fields = cast(dict[str, str], await redis.hgetall(keys.config))
    if not fields:
        raise namespace_not_found(keys.namespace)
    return NamespaceConfig(
        mode=NamespaceMode(fields["mode"]), validate_reads=fields["validate_reads"] == "1"
    )

"""`StateStore`: the shared-state operations for one Redis, independent of HTTP.

Every call names the namespace and the `Actor` (tenant, agent, session) taken from the
caller's token; the tenant is part of every Redis key, so a namespace of another tenant is
simply not there. Authorization (which namespaces a principal may read or write) is the
caller's job: see `gateway.http.routes.state_routes`. What a tenant may put on the store (caps,
quotas, history length) is its `StateLimits`.
"""

from __future__ import annotations

from redis.asyncio import Redis

from gateway.config import Settings
from gateway.state.commit import commit
from gateway.state.history import read_history
from gateway.state.key_list import KeyListing, list_keys
from gateway.state.keys import Actor, NamespaceKeys, check_key, check_namespace
from gateway.state.leases import acquire_leases, release_lease
from gateway.state.limits import StateLimits
from gateway.state.namespaces import create_namespace, load_namespace
from gateway.state.reads import peek_key, read_key
from gateway.state.scripts import StateScripts
from protocol import (
    CommitRequest,
    CommitResult,
    HistoryEntry,
    LeaseGrants,
    NamespaceConfig,
    ReadResult,
)


class StateStore:
    def __init__(
        self, redis: Redis, limits: StateLimits, wait: tuple[int, int] | None = None
    ) -> None:
        self.redis = redis
        self.scripts = StateScripts.register(redis, wait)  # wait: durability "replicated"
        self.limits = limits

    @classmethod
    def from_settings(cls, redis: Redis, settings: Settings) -> StateStore:
        return cls(redis, StateLimits.from_settings(settings), settings.replica_wait)

    @staticmethod
    def keys(tenant: str, namespace: str) -> NamespaceKeys:
        return NamespaceKeys(tenant, check_namespace(namespace))

    async def create_namespace(self, tenant: str, namespace: str, config: NamespaceConfig) -> bool:
        keys = self.keys(tenant, namespace)
        return await create_namespace(self.scripts, keys, config, self.limits)

    async def namespace(self, tenant: str, namespace: str) -> NamespaceConfig:
        return await load_namespace(self.redis, self.keys(tenant, namespace))

    async def read(self, actor: Actor, namespace: str, key: str) -> ReadResult:
        keys = self.keys(actor.tenant, namespace)
        return await read_key(
            self.scripts,
            keys,
            actor,
            check_key(key),
            self.limits,
        )

    async def peek(self, tenant: str, namespace: str, key: str) -> ReadResult:
        """An operator's read: the key's value, version and lease, logged nowhere."""
        return await peek_key(self.redis, self.keys(tenant, namespace), key)

    async def acquire(
        self, actor: Actor, namespace: str, names: list[str], ttl_ms: int
    ) -> LeaseGrants:
        for name in names:
            check_key(name)
        keys = self.keys(actor.tenant, namespace)
        return await acquire_leases(self.scripts, keys, actor, names, ttl_ms, self.limits)

    async def release(self, actor: Actor, namespace: str, key: str) -> None:
        keys = self.keys(actor.tenant, namespace)
        await release_lease(self.scripts, keys, actor, check_key(key))

    async def commit(self, actor: Actor, namespace: str, request: CommitRequest) -> CommitResult:
        keys = self.keys(actor.tenant, namespace)
        return await commit(self.scripts, keys, actor, request, self.limits)

    async def history(
        self, tenant: str, namespace: str, *, after: str | None = None, limit: int = 100
    ) -> list[HistoryEntry]:
        keys = self.keys(tenant, namespace)
        await load_namespace(self.redis, keys)  # an unknown namespace is a 404, not []
        return await read_history(self.redis, keys, after=after, limit=limit)

    async def list_keys(
        self, tenant: str, namespace: str, *, after: str | None = None, limit: int = 100
    ) -> KeyListing:
        keys = self.keys(tenant, namespace)
        await load_namespace(self.redis, keys)  # an unknown namespace is a 404, not []
        return await list_keys(self.redis, keys, after=after, limit=limit)

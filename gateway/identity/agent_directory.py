"""Registered agents and revocations, kept in Redis so every gateway replica sees them.

A revocation is a marker per (tenant, agent) holding the second it was made: every token of
that agent issued at or before it is refused from the next request on, on any replica, with no
list of token ids to keep. Registering the agent again issues a token from a later second, so
a revoked agent can be re-admitted on purpose.
"""

from __future__ import annotations

import time

import anyio
from redis.asyncio import Redis

from gateway.identity.tokens import issue_token
from gateway.settings import Settings
from protocol import AgentRecord, AgentRegistration, AgentToken

_AGENTS = "conclave:agents"  # hash: "tenant/agent" -> AgentRecord JSON


def revocation_key(tenant: str, agent: str) -> str:
    """The agent's revocation marker (the second it was revoked); the budget stage's
    admission script reads it on every request."""
    return f"conclave:revoked:{tenant}/{agent}"


class AgentDirectory:
    def __init__(self, redis: Redis, settings: Settings) -> None:
        self.redis = redis
        self.settings = settings

    async def register(self, registration: AgentRegistration) -> AgentToken:
        marker = await self.redis.get(revocation_key(registration.tenant, registration.agent))
        if marker is not None:
            # A token from the revocation's own second would count as revoked: wait it out.
            await anyio.sleep(max(0.0, int(marker) + 1 - time.time()))
        scopes = registration.scopes()
        now = time.time()
        token = issue_token(
            self.settings,
            tenant=registration.tenant,
            agent=registration.agent,
            scopes=scopes,
            obo=registration.obo,
            ttl_s=registration.token_ttl_s,
            now=now,
        )
        record = AgentRecord(
            tenant=registration.tenant,
            agent=registration.agent,
            scopes=scopes,
            obo=registration.obo,
            created_at_ms=int(now * 1000),
        )
        await self.redis.hset(
            _AGENTS, _field(record.tenant, record.agent), record.model_dump_json()
        )
        return AgentToken(
            token=token,
            tenant=record.tenant,
            agent=record.agent,
            scopes=scopes,
            expires_at=int(now) + registration.token_ttl_s,
        )

    async def list(self, tenant: str | None = None) -> list[AgentRecord]:
        raw = await self.redis.hgetall(_AGENTS)
        records = [AgentRecord.model_validate_json(v) for v in raw.values()]
        records = [r for r in records if tenant is None or r.tenant == tenant]
        return sorted(records, key=lambda r: (r.tenant, r.agent))

    async def revoke(self, tenant: str, agent: str) -> AgentRecord | None:
        """Revoke every token the agent holds; None when no such agent was registered."""
        raw = await self.redis.hget(_AGENTS, _field(tenant, agent))
        if raw is None:
            return None
        record = AgentRecord.model_validate_json(raw).model_copy(update={"revoked": True})
        async with self.redis.pipeline(transaction=True) as pipe:
            # Kept as long as the longest token could live, then it has nothing left to refuse.
            pipe.set(revocation_key(tenant, agent), int(time.time()), ex=30 * 24 * 3600 + 60)
            pipe.hset(_AGENTS, _field(tenant, agent), record.model_dump_json())
            await pipe.execute()
        return record


def _field(tenant: str, agent: str) -> str:
    return f"{tenant}/{agent}"

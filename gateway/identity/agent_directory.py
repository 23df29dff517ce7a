"""Registered agents and their generations, kept in Redis so every gateway replica sees them.

Each (tenant, agent) has a generation, a counter in Redis that registering and revoking move
on. Every token carries the generation it was issued at (`gen`), and the budget stage's
admission script refuses a token whose generation is not the current one (AUTH_REVOKED). So
every token is revocable, from the next request on and on every replica, with no list of
token ids to keep: revoking the agent refuses all its tokens, and registering it again (say,
with fewer rights) refuses every token of the earlier registration. An agent never registered
is on generation 0.

The generation's key carries the tenant as its Redis Cluster hash tag, like the agent's rate
buckets, so the one admission script touches one slot. So does the tenant's hash of agent
records, so a registration (record and generation) stays one transaction on a cluster, on the
master that also holds the generation; a set of tenants lists them all.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from redis.asyncio import Redis

from gateway.config import Settings
from gateway.gateway_error import GatewayError
from gateway.identity.tokens import issue_token
from gateway.redis_io import PooledScript, lua_script
from protocol import AgentRecord, AgentRegistration, AgentToken, ErrorCode, Principal

_TENANTS = "conclave:tenants"  # set: every tenant that registered an agent


def _agents_key(tenant: str) -> str:
    """The tenant's hash: agent -> AgentRecord JSON (the generation's hash tag)."""
    return f"conclave:agents:{{{tenant}}}"


def generation_key(tenant: str, agent: str) -> str:
    """The agent's current generation (absent: 0); the admission script reads it."""
    return f"conclave:gen:{{{tenant}}}:{agent}"


def token_revoked(principal: Principal) -> GatewayError:
    """AUTH_REVOKED for a token of an earlier generation of its agent."""
    return GatewayError.of(
        ErrorCode.AUTH_REVOKED,
        f"this token of {principal.tenant}/{principal.agent} was revoked (the agent was revoked"
        " or registered again): use the token of its latest registration",
    )


_NEXT_GENERATION = lua_script("gateway.identity", "next_generation")


class AgentDirectory:
    def __init__(self, redis: Redis, settings: Settings) -> None:
        self.redis = redis
        self.settings = settings
        self._next_generation = PooledScript(redis, _NEXT_GENERATION.text, name="next_generation")

    async def register(self, registration: AgentRegistration) -> AgentToken:
        """Record the agent's rights, start its next generation and issue its token."""
        self._check_ttl(registration.token_ttl_s)
        now = time.time()
        record = AgentRecord(
            tenant=registration.tenant,
            agent=registration.agent,
            scopes=registration.scopes(),
            obo=registration.obo,
            created_at_ms=int(now * 1000),
        )
        await self.redis.sadd(_TENANTS, record.tenant)
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.incr(generation_key(record.tenant, record.agent))
            pipe.hset(_agents_key(record.tenant), record.agent, record.model_dump_json())
            generation, _ = await pipe.execute()
        return self._token(
            record, record.scopes, record.obo, registration.token_ttl_s, now, generation
        )

    async def issue(
        self,
        tenant: str,
        agent: str,
        *,
        scopes: Sequence[str] = (),
        obo: str | None = None,
        ttl_s: int | None = None,
    ) -> AgentToken:
        """Another token for a registered agent, within its registration (`conclave token
        issue`): scopes a subset of the registered ones (none asked: all of them), the
        registered on-behalf-of user, the current generation. Refusals name the fix."""
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.hget(_agents_key(tenant), agent)
            pipe.get(generation_key(tenant, agent))
            raw, generation = await pipe.execute()
        if raw is None:
            raise GatewayError.of(
                ErrorCode.NOT_FOUND,
                f"agent {tenant}/{agent} is not registered: register it first (POST /v1/agents)",
            )
        record = AgentRecord.model_validate_json(raw)
        if record.revoked:
            raise GatewayError.of(
                ErrorCode.AUTH_REVOKED,
                f"agent {tenant}/{agent} was revoked: register it again (POST /v1/agents)",
            )
        beyond = [s for s in scopes if s not in record.scopes]
        if beyond:
            raise GatewayError.of(
                ErrorCode.INVALID_REQUEST,
                f"scopes {beyond} are beyond {tenant}/{agent}'s registration"
                f" {record.scopes}: ask for a subset, or register it again with them",
            )
        if obo is not None and obo != record.obo:
            raise GatewayError.of(
                ErrorCode.INVALID_REQUEST,
                f"{tenant}/{agent} is registered on behalf of {record.obo!r}, not {obo!r}",
            )
        ttl = ttl_s if ttl_s is not None else self.settings.token_ttl_s
        self._check_ttl(ttl)
        granted = list(scopes) or record.scopes
        return self._token(record, granted, record.obo, ttl, time.time(), int(generation or 0))

    async def list(self, tenant: str | None = None) -> list[AgentRecord]:
        tenants = [tenant] if tenant is not None else await self._tenants()
        async with self.redis.pipeline(transaction=False) as pipe:
            for name in tenants:
                pipe.hvals(_agents_key(name))
            found: list[list[str]] = await pipe.execute()
        records = [AgentRecord.model_validate_json(v) for values in found for v in values]
        return sorted(records, key=lambda r: (r.tenant, r.agent))

    async def revoke(self, tenant: str, agent: str) -> AgentRecord | None:
        """Revoke every token the agent holds; None when no such agent was registered.

        The generation moves on either way: a token signed for an unregistered agent (by an
        identity provider, or in-process with the secret) is refused from then on too.
        The record is marked revoked first and the generation moved last, so an answer means
        both are done; under durability "replicated" that answer waits for a replica to
        confirm them, else it is 503 DURABILITY_UNCONFIRMED, and revoking again is safe (the
        generation moves on once more: every earlier token stays refused).
        """
        raw = await self.redis.hget(_agents_key(tenant), agent)
        record = None
        if raw is not None:
            record = AgentRecord.model_validate_json(raw).model_copy(update={"revoked": True})
            await self.redis.hset(_agents_key(tenant), agent, record.model_dump_json())
        await self._next_generation(
            _NEXT_GENERATION.keys(generation=generation_key(tenant, agent)),
            _NEXT_GENERATION.argv(),
            wait=self.settings.replica_wait,
        )
        return record

    async def _tenants(self) -> Sequence[str]:
        return sorted(str(name) for name in await self.redis.smembers(_TENANTS))

    def _check_ttl(self, ttl_s: int) -> None:
        if ttl_s > self.settings.token_ttl_max_s:
            raise GatewayError.of(
                ErrorCode.INVALID_REQUEST,
                f"a token may live at most {self.settings.token_ttl_max_s} s"
                f" (CONCLAVE_TOKEN_TTL_MAX_S); asked for {ttl_s} s",
            )

    def _token(
        self,
        record: AgentRecord,
        scopes: Sequence[str],
        obo: str | None,
        ttl_s: int,
        now: float,
        generation: int,
    ) -> AgentToken:
        token = issue_token(
            self.settings,
            tenant=record.tenant,
            agent=record.agent,
            scopes=scopes,
            obo=obo,
            ttl_s=ttl_s,
            generation=generation,
            now=now,
        )
        return AgentToken(
            token=token,
            tenant=record.tenant,
            agent=record.agent,
            scopes=list(scopes),
            expires_at=int(now) + ttl_s,
        )

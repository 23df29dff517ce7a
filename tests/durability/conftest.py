"""Fixtures for durability tests: a real Redis master + replica, and gateways in-process on it."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from gateway.assembly import create_app
from gateway.config import Settings
from gateway.identity.tokens import issue_token
from protocol import ADMIN_KEY_HEADER
from tests.conftest import TEST_SECRETS
from tests.redis_replication import RedisReplicaPair

ADMIN = {ADMIN_KEY_HEADER: TEST_SECRETS["admin_key"]}


@pytest.fixture
def pair() -> Iterator[RedisReplicaPair]:
    with RedisReplicaPair() as servers:
        yield servers


def durable_settings(url: str, durability: str = "replicated", timeout_ms: int = 300) -> Settings:
    return Settings(
        redis_url=url,
        port=0,
        sandbox_backend="process",
        allowed_hosts=("g",),
        durability=durability,
        durability_timeout_ms=timeout_ms,
        **TEST_SECRETS,
    )


@dataclass
class Gateway:
    """One in-process gateway; `as_agent` gives an agent's headers (a registered token)."""

    client: httpx.AsyncClient
    settings: Settings
    transport: httpx.ASGITransport

    def as_agent(self, agent: str = "alice") -> dict[str, str]:
        token = issue_token(self.settings, tenant="acme", agent=agent, scopes=["state:*:write"])
        return {"Authorization": f"Bearer {token}"}

    async def commit(self, agent: str, *writes: dict[str, Any], **extra: Any) -> httpx.Response:
        body = {"writes": list(writes), **extra}
        return await self.client.post(
            "/v1/state/ledger/commit", json=body, headers=self.as_agent(agent)
        )

    async def lease(self, agent: str, key: str, ttl_ms: int = 10_000) -> httpx.Response:
        body = {"keys": [key], "ttl_ms": ttl_ms}
        return await self.client.post(
            "/v1/state/ledger/leases", json=body, headers=self.as_agent(agent)
        )


@asynccontextmanager
async def gateway(settings: Settings) -> AsyncIterator[Gateway]:
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://g") as client:
            yield Gateway(client, settings, transport)

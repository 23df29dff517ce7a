"""Fixtures for shared-state tests: agents with tokens, speaking to the in-process gateway."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from gateway.config import Settings
from gateway.identity.tokens import issue_token


@dataclass
class AgentHttp:
    """One agent's view of the state API: its token, session and the gateway client."""

    client: httpx.AsyncClient
    headers: dict[str, str]

    async def put_namespace(
        self, ns: str, mode: str = "optimistic", **extra: Any
    ) -> httpx.Response:
        return await self.client.put(
            f"/v1/state/{ns}", json={"mode": mode, **extra}, headers=self.headers
        )

    async def read(self, ns: str, key: str) -> httpx.Response:
        return await self.client.get(f"/v1/state/{ns}/{key}", headers=self.headers)

    async def lease(self, ns: str, *keys: str, ttl_ms: int = 10_000) -> httpx.Response:
        body = {"keys": list(keys), "ttl_ms": ttl_ms}
        return await self.client.post(f"/v1/state/{ns}/leases", json=body, headers=self.headers)

    async def release(self, ns: str, key: str) -> httpx.Response:
        return await self.client.delete(f"/v1/state/{ns}/leases/{key}", headers=self.headers)

    async def commit(self, ns: str, *writes: dict[str, Any], **extra: Any) -> httpx.Response:
        body = {"writes": list(writes), **extra}
        return await self.client.post(f"/v1/state/{ns}/commit", json=body, headers=self.headers)

    async def history(self, ns: str) -> list[dict[str, Any]]:
        response = await self.client.get(
            f"/v1/state/{ns}/history", params={"limit": 1000}, headers=self.headers
        )
        assert response.status_code == 200, response.text
        entries: list[dict[str, Any]] = response.json()["entries"]
        return entries


@pytest.fixture
def agent(client: httpx.AsyncClient, settings: Settings) -> Any:
    """`agent(name, scopes=..., tenant=..., session=...)` -> AgentHttp."""

    def make(
        name: str = "alice",
        scopes: tuple[str, ...] = ("state:*:write",),
        tenant: str = "acme",
        session: str | None = None,
    ) -> AgentHttp:
        token = issue_token(settings, tenant=tenant, agent=name, scopes=scopes)
        headers = {"Authorization": f"Bearer {token}"}
        if session:
            headers["X-Conclave-Session"] = session
        return AgentHttp(client, headers)

    return make

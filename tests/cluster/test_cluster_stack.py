"""The gateway under uvicorn, in its own process, on a Redis Cluster named by its URL."""

from __future__ import annotations

import httpx
import pytest
from redis.asyncio import Redis

from conclave.stack import EmbeddedStack
from gateway.config import Settings
from gateway.state import NamespaceKeys, check_namespace_history

pytestmark = pytest.mark.anyio


async def test_a_served_gateway_registers_calls_commits_and_revokes(
    redis_url: str, redis: Redis
) -> None:
    settings = Settings(redis_url=redis_url, port=0, sandbox_backend="process")
    with EmbeddedStack(settings) as stack:
        async with httpx.AsyncClient(base_url=stack.url, timeout=10) as http:
            body = {"tenant": "acme", "agent": "served", "tools": ["echo"],
                    "namespaces": {"notes": "write"}}  # fmt: skip
            registered = await http.post("/v1/agents", json=body, headers=stack.admin_headers)
            assert registered.status_code == 201, registered.text
            agent = {"Authorization": f"Bearer {registered.json()['token']}"}
            call = await http.post(
                "/v1/tools/echo/call", json={"arguments": {"message": "hi"}}, headers=agent
            )
            assert call.status_code == 200 and call.json()["result"] == "hi"
            await http.put("/v1/state/notes", json={"mode": "optimistic"}, headers=agent)
            write = {"writes": [{"key": "k", "value": 1}]}
            done = await http.post("/v1/state/notes/commit", json=write, headers=agent)
            assert done.status_code == 200, done.text
            revoked = await http.delete("/v1/agents/acme/served", headers=stack.admin_headers)
            assert revoked.status_code == 200, revoked.text
            refused = await http.post(
                "/v1/tools/echo/call", json={"arguments": {"message": "hi"}}, headers=agent
            )
            assert refused.json()["code"] == "AUTH_REVOKED"
    report = await check_namespace_history(redis, NamespaceKeys("acme", "notes"))
    assert report.anomalies == [] and report.commits == 1

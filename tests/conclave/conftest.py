"""Fixtures for the bench suites' tests."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest
from redis.asyncio import Redis

from agents import GatewayClient
from gateway.assembly import create_app
from gateway.config import Settings


@pytest.fixture
async def admin(settings: Settings, redis: Redis) -> AsyncIterator[GatewayClient]:
    """An admin client of a gateway, in-process, that also serves the AgentDojo suites' tools."""
    modules = (*settings.tool_modules, "tools.harness.agentdojo_suites")
    app = create_app(settings.model_copy(update={"tool_modules": modules}))
    async with app.router.lifespan_context(app):
        key = settings.admin_key.get_secret_value()
        transport = httpx.ASGITransport(app=app)
        async with GatewayClient("http://gateway", admin_key=key, transport=transport) as client:
            yield client

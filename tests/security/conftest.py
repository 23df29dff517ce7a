"""The hostile-tenant suites (issue 13): each attack runs against a real stack and checks the
exact refusal the attacker gets and that the victim tenant's calls are unaffected."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest
from redis.asyncio import Redis

from gateway.assembly import create_app
from gateway.config import Settings
from gateway.identity.tokens import issue_token

HOSTILE_MODULES = ("tools.builtin", "tools.harness.misbehaving", "tools.harness.hostile")


class SandboxedGateway:
    """The gateway in-process over a real sandbox pool, serving the hostile tools."""

    def __init__(self, client: httpx.AsyncClient, settings: Settings) -> None:
        self.client = client
        self.settings = settings

    def bearer(self, tenant: str, agent: str) -> dict[str, str]:
        token = issue_token(self.settings, tenant=tenant, agent=agent, scopes=["tool:*"])
        return {"Authorization": f"Bearer {token}"}


@pytest.fixture(params=["bwrap", "docker"])
async def sandboxed_gateway(
    request: pytest.FixtureRequest, redis_url: str, redis: Redis
) -> AsyncIterator[SandboxedGateway]:
    """The gateway on each isolating backend (bwrap, docker), with a fresh Redis."""
    request.getfixturevalue("docker_engine" if request.param == "docker" else "bwrap_available")
    settings = Settings(
        redis_url=redis_url,
        port=0,
        sandbox_backend=request.param,
        tool_modules=HOSTILE_MODULES,
        secret="security-suite-secret-" + "x" * 32,
        admin_key="security-suite-admin-key",
    )
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as client:
            yield SandboxedGateway(client, settings)

from __future__ import annotations

import httpx
import pytest

from gateway.assembly import create_app
from gateway.config import Settings

pytestmark = pytest.mark.anyio


async def test_health_and_ready(client: httpx.AsyncClient) -> None:
    assert (await client.get("/healthz")).json() == {"status": "ok"}
    ready = await client.get("/readyz")
    assert ready.status_code == 200 and ready.json()["redis"] == "ok"


async def test_ready_is_a_serf_503_when_redis_is_gone(tmp_path: object) -> None:
    app = create_app(Settings(redis_url="unix:///nonexistent/redis.sock", allowed_hosts=("g",)))
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://g") as c:
            assert (await c.get("/healthz")).status_code == 200
            ready = await c.get("/readyz")
    assert ready.status_code == 503
    body = ready.json()
    assert body["code"] == "STATE_UNAVAILABLE" and body["retryable"] is True
    assert body["action"] == "retry_backoff"


async def test_unknown_route_is_a_serf_404(client: httpx.AsyncClient) -> None:
    response = await client.get("/v1/nothing-here")
    assert response.status_code == 404 and response.json()["code"] == "NOT_FOUND"

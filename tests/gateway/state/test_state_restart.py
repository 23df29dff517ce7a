"""Redis restarted under running agents: 503 STATE_UNAVAILABLE meanwhile, no half commit."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import anyio
import httpx
import pytest

from conclave.stack.embedded_redis import EmbeddedRedis
from gateway.assembly import create_app
from gateway.config import Settings
from gateway.identity.tokens import issue_token
from tests.helpers import until

pytestmark = pytest.mark.anyio


async def test_commits_survive_a_redis_restart_whole_or_not_at_all(tmp_path: Path) -> None:
    server = EmbeddedRedis(tmp_path / "redis", persist=True)
    server.start()
    try:
        settings = Settings(
            redis_url=server.url, port=0, sandbox_backend="process", allowed_hosts=("g",)
        )
        await _run_through_restart(server, settings)
    finally:
        server.close()


async def _run_through_restart(server: EmbeddedRedis, settings: Settings) -> None:
    app = create_app(settings)
    token = issue_token(settings, tenant="acme", agent="writer", scopes=["state:*:write"])
    headers = {"Authorization": f"Bearer {token}"}
    seen: Counter[int] = Counter()
    successes_after_restart = 0
    restarted = anyio.Event()

    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://g") as client:
            put = await client.put("/v1/state/pairs", json={}, headers=headers)
            assert put.status_code == 201

            async def writer(n: int) -> None:
                nonlocal successes_after_restart
                i = 0
                while successes_after_restart < 40:
                    i += 1
                    value = f"{n}-{i}"
                    writes = [{"key": "a", "value": value}, {"key": "b", "value": value}]
                    response = await client.post(
                        "/v1/state/pairs/commit", json={"writes": writes}, headers=headers
                    )
                    seen[response.status_code] += 1
                    if response.status_code == 503:
                        body = response.json()
                        assert body["code"] == "STATE_UNAVAILABLE" and body["retryable"]
                        await anyio.sleep(0.01)  # back off as the envelope says
                    else:
                        assert response.status_code == 200, response.text
                        if restarted.is_set():
                            successes_after_restart += 1

            async with anyio.create_task_group() as tasks:
                for n in range(4):
                    tasks.start_soon(writer, n)
                await until(lambda: seen[200] >= 30, 20.0)
                await anyio.to_thread.run_sync(server.stop)
                await until(lambda: seen[503] >= 4, 20.0)
                down = await client.get("/v1/state/pairs/a", headers=headers)
                assert down.status_code == 503 and down.json()["code"] == "STATE_UNAVAILABLE"
                await anyio.to_thread.run_sync(server.start)
                restarted.set()

            a = (await client.get("/v1/state/pairs/a", headers=headers)).json()
            b = (await client.get("/v1/state/pairs/b", headers=headers)).json()
            history = await client.get(
                "/v1/state/pairs/history", params={"limit": 1000}, headers=headers
            )
    entries = history.json()["entries"]
    assert seen[200] >= 70 and seen[503] >= 4
    assert (a["version"], a["value"]) == (b["version"], b["value"])
    assert len(entries) == a["version"]  # one entry per applied commit, none lost or doubled
    assert all(set(e["keys"]) == {"a", "b"} for e in entries)
    assert all(e["values"]["a"] == e["values"]["b"] for e in entries)

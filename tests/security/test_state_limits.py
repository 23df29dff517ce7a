"""Shared state cannot be flooded (issue 13, WP-C): a hostile tenant hits rate limits, caps,
quotas and a bounded history, each refused with its SERF code, and the victim tenant's state
calls go on unaffected; a full Redis is refused clearly, never a 500."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis as sync_redis
from redis.asyncio import Redis

from conclave.stack import EmbeddedStack
from conclave.stack.embedded_redis import EmbeddedRedis
from gateway.assembly import create_app
from gateway.config import Settings
from gateway.identity.tokens import issue_token

pytestmark = pytest.mark.anyio


class Agent:
    """One agent of one tenant, speaking to the in-process gateway."""

    def __init__(self, client: httpx.AsyncClient, settings: Settings, tenant: str) -> None:
        token = issue_token(settings, tenant=tenant, agent="agent", scopes=["state:*:write"])
        self.client = client
        self.headers = {"Authorization": f"Bearer {token}"}

    async def put_namespace(self, ns: str) -> httpx.Response:
        return await self.client.put(f"/v1/state/{ns}", json={}, headers=self.headers)

    async def read(self, ns: str, key: str, session: str = "s") -> httpx.Response:
        headers = {**self.headers, "X-Conclave-Session": session}
        return await self.client.get(f"/v1/state/{ns}/{key}", headers=headers)

    async def commit(self, ns: str, writes: list[dict[str, Any]], **extra: Any) -> httpx.Response:
        body = {"writes": writes, **extra}
        return await self.client.post(f"/v1/state/{ns}/commit", json=body, headers=self.headers)

    async def history(self, ns: str) -> list[dict[str, Any]]:
        response = await self.client.get(
            f"/v1/state/{ns}/history", params={"limit": 1000}, headers=self.headers
        )
        assert response.status_code == 200, response.text
        entries: list[dict[str, Any]] = response.json()["entries"]
        return entries


@asynccontextmanager
async def _gateway(redis_url: str, **limits: Any) -> AsyncIterator[tuple[Agent, Agent]]:
    """The gateway in-process with `limits`; yields (mallory of tenant evil, victim of good)."""
    settings = Settings(redis_url=redis_url, port=0, sandbox_backend="process", **limits)
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as c:
            yield Agent(c, settings, "evil"), Agent(c, settings, "good")


def _refused(response: httpx.Response, status: int, code: str) -> dict[str, Any]:
    assert (response.status_code, response.json()["code"]) == (status, code), response.text
    body: dict[str, Any] = response.json()
    return body


async def test_a_flood_of_state_operations_is_rate_limited_per_identity(
    redis_url: str, redis: Redis
) -> None:
    async with _gateway(redis_url, rate_limit_per_s=0.5, rate_limit_burst=6) as (mallory, victim):
        assert (await mallory.put_namespace("a")).status_code == 201
        assert (await victim.put_namespace("a")).status_code == 201
        for i in range(5):
            assert (await mallory.read("a", f"k{i}")).status_code == 200
        flooded = await mallory.read("a", "k")
        body = _refused(flooded, 429, "RATE_LIMITED")
        assert body["retryable"] is True and body["retry_after_ms"] > 0
        assert int(flooded.headers["Retry-After"]) >= 1
        # Every state operation, in any namespace, takes from the same bucket.
        assert (await mallory.put_namespace("b")).status_code == 429
        assert (await mallory.commit("a", [{"key": "k", "value": 1}])).status_code == 429
        # The other tenant's calls are not slowed by mallory's flood.
        assert (await victim.read("a", "k")).status_code == 200
        assert (await victim.commit("a", [{"key": "k", "value": 1}])).status_code == 200


async def test_a_commit_over_the_read_set_or_write_cap_is_refused_before_redis(
    redis_url: str, redis: Redis
) -> None:
    async with _gateway(redis_url, state_max_read_set=1_000, state_max_writes=4) as (mallory, _):
        await mallory.put_namespace("a")
        huge_read_set = {f"r{i}": 0 for i in range(1_001)}
        refused = await mallory.commit("a", [{"key": "k", "value": 1}], read_set=huge_read_set)
        body = _refused(refused, 413, "PAYLOAD_TOO_LARGE")
        assert "1000" in body["message"] and "state_max_read_set" in body["message"]
        writes = [{"key": f"w{i}", "value": i} for i in range(5)]
        body = _refused(await mallory.commit("a", writes), 413, "PAYLOAD_TOO_LARGE")
        assert "state_max_writes" in body["message"] and body["details"]["limit"] == 4
        assert await mallory.history("a") == []  # nothing was applied
        at_cap = await mallory.commit(
            "a", writes[:4], read_set=dict(list(huge_read_set.items())[:1000])
        )
        assert at_cap.status_code == 200, at_cap.text


async def test_a_session_read_log_is_capped(redis_url: str, redis: Redis) -> None:
    async with _gateway(redis_url, state_max_read_log=3) as (mallory, _):
        await mallory.put_namespace("a")
        for key in ("k1", "k2", "k3", "k1"):  # a key read again takes no new room
            assert (await mallory.read("a", key)).status_code == 200
        body = _refused(await mallory.read("a", "k4"), 400, "INVALID_REQUEST")
        assert "state_max_read_log" in body["message"] and body["details"]["limit"] == 3
        assert (await mallory.read("a", "k4", session="fresh")).status_code == 200
        # A commit logs the keys it writes: it cannot overfill the log either, and is refused
        # whole.
        writes = [{"key": "k1", "value": 1}, {"key": "w1", "value": 1}]
        headers = {**mallory.headers, "X-Conclave-Session": "s"}
        refused = await mallory.client.post(
            "/v1/state/a/commit", json={"writes": writes}, headers=headers
        )
        _refused(refused, 400, "INVALID_REQUEST")
        assert (await mallory.read("a", "k1")).json()["version"] == 0
        assert await mallory.history("a") == []


async def test_the_history_stream_keeps_about_the_configured_length(
    redis_url: str, redis: Redis
) -> None:
    limits = {"state_history_max": 10, "rate_limit_per_s": 10_000.0, "rate_limit_burst": 10_000}
    async with _gateway(redis_url, **limits) as (mallory, _):
        await mallory.put_namespace("a")
        for i in range(400):
            done = await mallory.commit("a", [{"key": "k", "value": i}])
            assert done.status_code == 200, done.text
        entries = await mallory.history("a")
        # MAXLEN ~ trims whole stream nodes (100 entries each by default): about 10 are kept.
        assert 10 <= len(entries) <= 10 + 100
        assert entries[-1]["commit_id"] == done.json()["commit_id"]
        assert entries[-1]["values"] == {"k": 399}


async def test_a_tenant_over_its_state_quota_is_refused_whole(redis_url: str, redis: Redis) -> None:
    # Bytes are every byte the tenant holds: values, keys, history entries, read logs.
    limits = {"state_quota_keys": 3, "state_quota_bytes": 3_500}
    async with _gateway(redis_url, **limits) as (mallory, victim):
        for agent in (mallory, victim):
            await agent.put_namespace("a")
            await agent.put_namespace("b")
        fill = [{"key": f"k{i}", "value": "x"} for i in range(2)]
        assert (await mallory.commit("a", fill)).status_code == 200
        assert (await mallory.commit("b", [{"key": "k", "value": "x"}])).status_code == 200
        # A fourth key, in either namespace: the quota is the tenant's.
        over = await mallory.commit(
            "a", [{"key": "k0", "value": "changed"}, {"key": "new", "value": 1}]
        )
        body = _refused(over, 507, "STATE_QUOTA_EXCEEDED")
        assert body["retryable"] is False and "state_quota_keys" in body["message"]
        used = body["details"]["used"]
        assert used["keys"] == 3 and 9 + 2 * 200 < used["bytes"] < 2_000  # values, keys, history
        # Refused whole: the overwrite in the same commit was not applied either.
        assert (await mallory.read("a", "k0")).json()["value"] == "x"
        assert (await mallory.read("a", "new")).json()["version"] == 0
        # Bytes count too; overwriting a key in place and deleting pass (their history fits).
        too_big = await mallory.commit("a", [{"key": "k0", "value": "y" * 3_000}])
        _refused(too_big, 507, "STATE_QUOTA_EXCEEDED")
        assert (await mallory.commit("a", [{"key": "k0", "value": "z"}])).status_code == 200
        assert (await mallory.commit("b", [{"key": "k", "delete": True}])).status_code == 200
        assert (await mallory.commit("a", [{"key": "new", "value": 1}])).status_code == 200
        # The other tenant has its own quota, untouched by mallory's.
        mine = [{"key": f"v{i}", "value": "ok"} for i in range(3)]
        assert (await victim.commit("b", mine)).status_code == 200


async def test_a_full_embedded_redis_is_a_clear_retryable_503(tmp_path: Path) -> None:
    with EmbeddedRedis(tmp_path / "redis", persist=False, maxmemory_mb=3) as server:
        with sync_redis.Redis(
            unix_socket_path=str(server.socket_path), decode_responses=True
        ) as raw:
            assert raw.config_get("maxmemory-policy")["maxmemory-policy"] == "noeviction"
        # No reserve: Redis itself fills and refuses the write (the reserve has its own test).
        async with _gateway(server.url, redis_reserve_mb=0) as (mallory, _):
            assert (await mallory.put_namespace("a")).status_code == 201
            chunk = "x" * 100_000
            for i in range(200):  # at most 20 MB of values: the 3 MB store fills up first
                response = await mallory.commit("a", [{"key": f"k{i}", "value": chunk}])
                if response.status_code != 200:
                    break
            body = _refused(response, 503, "STATE_UNAVAILABLE")
            assert body["retryable"] is True and body["retry_after_ms"] > 0
            assert "full" in body["message"] and "MAXMEMORY" in body["message"]


def test_the_embedded_redis_takes_its_memory_ceiling_and_fsync_from_settings(
    tmp_path: Path,
) -> None:
    settings = Settings(
        port=0,
        sandbox_backend="process",
        redis_data_dir=str(tmp_path / "redis"),
        redis_maxmemory_mb=64,
        redis_fsync="always",
    )
    with EmbeddedStack(settings) as stack:
        assert stack.redis is not None
        socket_path = str(stack.redis.socket_path)
        with sync_redis.Redis(unix_socket_path=socket_path, decode_responses=True) as raw:
            config = raw.config_get("*")
    assert config["appendfsync"] == "always"
    assert (config["maxmemory"], config["maxmemory-policy"]) == (str(64 << 20), "noeviction")

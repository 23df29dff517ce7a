"""The gateway on a Redis Cluster, in-process: agents, admission, state, the audit stream."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import anyio
import httpx
import pytest
from redis.asyncio import Redis

from conclave.bench.chaos.redis_cluster import LocalRedisCluster
from gateway.config import Settings
from gateway.state import NamespaceKeys, check_namespace_history
from protocol import ADMIN_KEY_HEADER
from tests.conftest import TEST_SECRETS
from tests.helpers import in_process_gateway, registered_token

pytestmark = pytest.mark.anyio

ADMIN = {ADMIN_KEY_HEADER: TEST_SECRETS["admin_key"]}


def _settings(redis_url: str, **limits: Any) -> Settings:
    return Settings(
        redis_url=redis_url,
        port=0,
        sandbox_backend="process",
        allowed_hosts=("gateway",),
        tool_modules=("tools.builtin", "tools.harness.faults"),
        breaker_failures=2,
        breaker_cooldown_ms=60_000,
        **limits,
        **TEST_SECRETS,
    )


@pytest.fixture
async def client(redis_url: str, redis: Redis) -> AsyncIterator[httpx.AsyncClient]:
    async with in_process_gateway(_settings(redis_url)) as gateway:
        yield gateway


@pytest.fixture
async def limited_client(redis_url: str, redis: Redis) -> AsyncIterator[httpx.AsyncClient]:
    """A gateway whose agents may make 6 calls at once, then one every 2 s."""
    async with in_process_gateway(
        _settings(redis_url, rate_limit_per_s=0.5, rate_limit_burst=6)
    ) as c:
        yield c


async def _register(client: httpx.AsyncClient, tenant: str, agent: str) -> dict[str, str]:
    rights: dict[str, Any] = {"tools": ["*"], "namespaces": {"*": "write"}}
    token = await registered_token(client, ADMIN, tenant, agent, **rights)
    return {"Authorization": f"Bearer {token}"}


async def _echo(client: httpx.AsyncClient, headers: dict[str, str]) -> httpx.Response:
    return await client.post(
        "/v1/tools/echo/call", json={"arguments": {"message": "hi"}}, headers=headers
    )


async def test_register_call_list_and_revoke(client: httpx.AsyncClient) -> None:
    writer = await _register(client, "acme", "writer")
    await _register(client, "globex", "reader")
    assert (await _echo(client, writer)).json()["result"] == "hi"
    listed = (await client.get("/v1/agents", headers=ADMIN)).json()
    assert {(a["tenant"], a["agent"]) for a in listed} >= {("acme", "writer"), ("globex", "reader")}
    revoked = await client.delete("/v1/agents/acme/writer", headers=ADMIN)
    assert revoked.status_code == 200, revoked.text
    refused = await _echo(client, writer)
    assert refused.status_code == 401 and refused.json()["code"] == "AUTH_REVOKED"


async def test_rate_limit_and_breaker_hold_on_the_cluster(
    limited_client: httpx.AsyncClient,
) -> None:
    client = limited_client
    headers = await _register(client, "acme", f"a{uuid.uuid4().hex[:8]}")
    answers = [(await _echo(client, headers)).status_code for _ in range(8)]
    assert answers[:6] == [200] * 6 and answers[6:] == [429, 429]
    other = await _register(client, "acme", f"b{uuid.uuid4().hex[:8]}")
    for _ in range(2):
        failed = await client.post("/v1/tools/broken/call", json={}, headers=other)
        assert failed.status_code == 502, failed.text
    shut = await client.post("/v1/tools/broken/call", json={}, headers=other)
    assert shut.status_code == 503 and shut.json()["details"]["breaker"] == "open"
    latency = (await client.get("/v1/tools/echo/latency", headers=other)).json()
    assert latency["samples"] >= 6


async def test_leases_fencing_commits_and_ops(client: httpx.AsyncClient) -> None:
    alice = await _register(client, "acme", "alice")
    bob = await _register(client, "acme", "bob")
    created = await client.put("/v1/state/plans", json={"mode": "owned"}, headers=alice)
    assert created.status_code == 201, created.text
    lease = await client.post("/v1/state/plans/leases", json={"keys": ["a", "b"]}, headers=alice)
    assert lease.status_code == 200, lease.text
    fence = {g["key"]: g["fencing_token"] for g in lease.json()["leases"]}
    writes = [
        {"key": "a", "value": {"step": 1}, "fencing_token": fence["a"]},
        {"key": "b", "value": [1], "fencing_token": fence["b"]},
    ]
    done = await client.post("/v1/state/plans/commit", json={"writes": writes}, headers=alice)
    assert done.status_code == 200 and done.json()["versions"] == {"a": 1, "b": 1}
    held = await client.post("/v1/state/plans/leases", json={"keys": ["a"]}, headers=bob)
    assert held.status_code == 409, held.text
    released = await client.delete("/v1/state/plans/leases/b", headers=alice)
    assert released.status_code == 204, released.text
    taken = await client.post("/v1/state/plans/leases", json={"keys": ["b"]}, headers=bob)
    assert taken.json()["leases"][0]["fencing_token"] > fence["b"]
    stale = {"key": "b", "value": [9], "fencing_token": fence["b"]}
    refused = await client.post("/v1/state/plans/commit", json={"writes": [stale]}, headers=alice)
    assert refused.status_code == 409, refused.text
    op = {"key": "b", "op": "append", "value": 2, "fencing_token": fence["b"] + 1}
    appended = await client.post("/v1/state/plans/commit", json={"writes": [op]}, headers=bob)
    assert appended.status_code == 200, appended.text
    read = (await client.get("/v1/state/plans/b", headers=alice)).json()
    assert (read["value"], read["version"]) == ([1, 2], 2)


async def test_concurrent_writers_leave_a_serializable_history(
    client: httpx.AsyncClient, redis: Redis
) -> None:
    agents = [await _register(client, "acme", f"w{i}") for i in range(4)]
    await client.put("/v1/state/counter", json={"mode": "optimistic"}, headers=agents[0])

    async def increment(headers: dict[str, str]) -> None:
        done = 0
        while done < 5:
            read = (await client.get("/v1/state/counter/n", headers=headers)).json()
            write = {"key": "n", "value": (read["value"] or 0) + 1}
            answer = await client.post(
                "/v1/state/counter/commit", json={"writes": [write]}, headers=headers
            )
            done += answer.status_code == 200

    async with anyio.create_task_group() as group:
        for headers in agents:
            group.start_soon(increment, headers)
    final = (await client.get("/v1/state/counter/n", headers=agents[0])).json()
    assert final["value"] == 20
    report = await check_namespace_history(redis, NamespaceKeys("acme", "counter"))
    assert report.anomalies == [] and report.commits == 20


async def test_audit_stream_records_calls(client: httpx.AsyncClient) -> None:
    headers = await _register(client, "acme", "audited")
    await _echo(client, headers)
    records = (await client.get("/v1/audit?agent=audited", headers=ADMIN)).json()
    assert [(r["tool"], r["outcome"]) for r in records] == [("echo", "ok")]


async def test_tenants_namespaces_spread_over_masters(
    client: httpx.AsyncClient, redis_cluster: LocalRedisCluster
) -> None:
    tenants = [f"t{i}" for i in range(8)]
    for tenant in tenants:
        headers = await _register(client, tenant, "bot")
        await client.put("/v1/state/notes", json={"mode": "optimistic"}, headers=headers)
        write = {"writes": [{"key": "k", "value": tenant}]}
        done = await client.post("/v1/state/notes/commit", json=write, headers=headers)
        assert done.status_code == 200, done.text
    homes: dict[int, list[str]] = {}
    for tenant in tenants:
        data_key = NamespaceKeys(tenant, "notes").data("k")
        port = redis_cluster.node_of_key(data_key)
        homes.setdefault(port, []).append(tenant)
        assert _read_on(port, data_key) == f'"{tenant}"'  # the value lives on that master
    assert len(homes) >= 2, homes


def _read_on(port: int, key: str) -> Any:
    import redis

    with redis.Redis(port=port, decode_responses=True) as node:
        return node.hget(key, "val")


async def test_the_console_finds_namespaces_on_every_master(
    client: httpx.AsyncClient, redis_cluster: LocalRedisCluster
) -> None:
    tenants = [f"c{i}" for i in range(8)]
    for tenant in tenants:
        headers = await _register(client, tenant, "bot")
        await client.put("/v1/state/shelf", json={"mode": "optimistic"}, headers=headers)
        write = {"writes": [{"key": f"item-{tenant}", "value": 1}]}
        assert (await client.post("/v1/state/shelf/commit", json=write, headers=headers)).is_success
    homes = {redis_cluster.node_of_key(NamespaceKeys(t, "shelf").config) for t in tenants}
    assert len(homes) >= 2  # the namespaces' keys live on several masters
    login = await client.post("/console/login", data={"admin_key": TEST_SECRETS["admin_key"]})
    assert login.status_code == 303
    listing = (await client.get("/console/namespaces")).text
    for tenant in tenants:
        assert f"/console/namespaces/{tenant}/shelf" in listing
    detail = await client.get(f"/console/namespaces/{tenants[0]}/shelf")
    assert detail.status_code == 200 and f"item-{tenants[0]}" in detail.text

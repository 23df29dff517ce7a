"""No tenant can fill the shared Redis (issue 26): every byte a tenant's state makes Redis hold
counts against its quota, Redis keeps a reserve for admission and revocation, and /readyz says
when Redis refuses writes.

The attack: with a namespace's write right only, mallory stores large values inside her quota,
then repeats a small commit of empty `merge` ops on them. Each commit used to copy the merged
values into the history stream, which no quota counted: about 8 such requests filled the
embedded Redis, and then every tenant's calls, and revoking mallory, failed.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis as sync_redis

from conclave.stack.embedded_redis import EmbeddedRedis
from gateway.assembly import create_app
from gateway.config import Settings
from gateway.identity.tokens import issue_token

pytestmark = pytest.mark.anyio

BIG = "x" * 199_998  # 200,000 bytes as JSON
SCOPES = ["state:*:write", "tool:*"]


class Tenant:
    """One agent of one tenant, speaking to the in-process gateway."""

    def __init__(self, client: httpx.AsyncClient, settings: Settings, tenant: str) -> None:
        token = issue_token(settings, tenant=tenant, agent="agent", scopes=SCOPES)
        self.client = client
        self.headers = {"Authorization": f"Bearer {token}"}

    async def commit(self, ns: str, writes: list[dict[str, Any]]) -> httpx.Response:
        body = {"writes": writes}
        return await self.client.post(f"/v1/state/{ns}/commit", json=body, headers=self.headers)

    async def works(self, i: int) -> None:
        """A commit, a read and a tool call, each answered."""
        done = await self.commit("a", [{"key": "n", "value": i}])
        assert done.status_code == 200, done.text
        read = await self.client.get("/v1/state/a/n", headers=self.headers)
        assert read.status_code == 200 and read.json()["value"] == i, read.text
        echo = {"arguments": {"message": f"hi {i}"}}
        called = await self.client.post("/v1/tools/echo/call", json=echo, headers=self.headers)
        assert called.status_code == 200 and called.json()["result"] == f"hi {i}", called.text


@asynccontextmanager
async def _gateway(redis_url: str, **limits: Any) -> AsyncIterator[tuple[Tenant, Tenant, Any]]:
    """The gateway in-process; yields (mallory of tenant evil, victim of good, revoke)."""
    settings = Settings(
        redis_url=redis_url,
        port=0,
        sandbox_backend="process",
        rate_limit_per_s=10_000.0,
        rate_limit_burst=10_000,
        **limits,
    )
    app = create_app(settings)
    admin = {"X-Conclave-Admin-Key": settings.admin_key.get_secret_value()}
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as c:

            async def revoke(agent: str) -> None:
                revoked = await c.delete(f"/v1/agents/evil/{agent}", headers=admin)
                assert revoked.status_code in (200, 404), revoked.text  # 404: never registered

            mallory, victim = Tenant(c, settings, "evil"), Tenant(c, settings, "good")
            for tenant in (mallory, victim):
                created = await c.put("/v1/state/a", json={}, headers=tenant.headers)
                assert created.status_code == 201, created.text
            yield mallory, victim, revoke


def _refused(response: httpx.Response, status: int, code: str) -> dict[str, Any]:
    assert (response.status_code, response.json()["code"]) == (status, code), response.text
    body: dict[str, Any] = response.json()
    return body


async def test_a_merge_flood_is_refused_at_the_attackers_quota(tmp_path: Path) -> None:
    # 800 KB: the two values and their two history entries, plus about 30 KB of room.
    quota = 830_000
    with EmbeddedRedis(tmp_path / "redis", persist=False, maxmemory_mb=64) as server:
        async with _gateway(server.url, state_quota_bytes=quota) as (mallory, victim, revoke):
            for key in ("big1", "big2"):
                stored = await mallory.commit("a", [{"key": key, "value": {"v": BIG}}])
                assert stored.status_code == 200, stored.text
            merge = [{"key": k, "op": "merge", "value": {}} for k in ("big1", "big2")]
            for i in range(1, 400):
                flood = await mallory.commit("a", merge)
                if flood.status_code != 200:
                    break
                if i % 25 == 0:
                    await victim.works(i)
                    await revoke("helper")  # another of mallory's agents
            # Refused once mallory's bytes reach her quota: a merge commit adds a few hundred
            # bytes of history (the op, not the 400 KB it produced), so ~100 commits fit.
            body = _refused(flood, 507, "STATE_QUOTA_EXCEEDED")
            assert 50 < i < 200, i
            used, adds = body["details"]["used"]["bytes"], body["details"]["commit_adds"]["bytes"]
            assert used <= quota < used + adds and adds < 1_000
            assert "history" in body["message"]
            # Refused whole, and from then on: the history did not grow.
            assert (await mallory.commit("a", merge)).status_code == 507
            with sync_redis.Redis(unix_socket_path=str(server.socket_path)) as raw:
                assert raw.xlen("cc:{t:evil}:ns:a:hist") == 2 + i - 1
                assert int(raw.info("memory")["used_memory"]) < 8 * 1_048_576
            # The victim's commits, reads and tool calls go on; mallory can still be revoked.
            await victim.works(1_000)
            await revoke("agent")
            _refused(await mallory.commit("a", merge), 401, "AUTH_REVOKED")


async def test_state_writes_stop_at_the_reserve_and_revocation_still_works(
    tmp_path: Path,
) -> None:
    # A 16 MB Redis keeps 4 MB (at most a quarter of maxmemory) for admission and revocation.
    with EmbeddedRedis(tmp_path / "redis", persist=False, maxmemory_mb=16) as server:
        async with _gateway(server.url, redis_reserve_mb=32) as (mallory, victim, revoke):
            await victim.works(0)
            for i in range(200):  # at most 40 MB of values: the reserve is reached first
                response = await mallory.commit("a", [{"key": f"k{i}", "value": BIG}])
                if response.status_code != 200:
                    break
            body = _refused(response, 507, "STATE_QUOTA_EXCEEDED")
            details = body["details"]
            assert (details["maxmemory"], details["reserve"]) == (16 << 20, 4 << 20)
            assert details["used_memory"] > (16 << 20) - (4 << 20) - 400_000
            assert "redis_reserve_mb" in body["message"]
            # Nothing fails for want of memory: Redis still takes the victim's tool calls
            # (admission, audit) and an operator's revocation, from the reserve.
            for _ in range(20):
                await revoke("helper")
            echo = {"arguments": {"message": "still here"}}
            called = await victim.client.post(
                "/v1/tools/echo/call", json=echo, headers=victim.headers
            )
            assert called.status_code == 200, called.text
            # A state write that frees memory passes even now.
            freed = await mallory.commit("a", [{"key": "k0", "delete": True}])
            assert freed.status_code == 200, freed.text
            await revoke("agent")
            _refused(
                await mallory.commit("a", [{"key": "k1", "delete": True}]), 401, "AUTH_REVOKED"
            )


async def test_readyz_says_not_ready_while_redis_refuses_writes(tmp_path: Path) -> None:
    with EmbeddedRedis(tmp_path / "redis", persist=False, maxmemory_mb=64) as server:
        settings = Settings(redis_url=server.url, port=0, sandbox_backend="process")
        app = create_app(settings)
        async with app.router.lifespan_context(app):
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as c:
                assert (await c.get("/readyz")).status_code == 200
                with sync_redis.Redis(unix_socket_path=str(server.socket_path)) as raw:
                    raw.config_set("maxmemory", 1)  # below what Redis already uses
                    try:
                        refused = await c.get("/readyz")
                    finally:
                        raw.config_set("maxmemory", 64 << 20)
                body = _refused(refused, 503, "STATE_UNAVAILABLE")
                assert body["retryable"] is True and "maxmemory" in body["message"]
                assert (await c.get("/readyz")).status_code == 200


async def test_leases_and_deletes_on_new_keys_count_against_the_quota(tmp_path: Path) -> None:
    # A lease, or a delete, on a key that was never written leaves the key's hash behind (its
    # fencing token, its version): without a charge, distinct names grew Redis without bound.
    with EmbeddedRedis(tmp_path / "redis", persist=False, maxmemory_mb=64) as server:
        async with _gateway(server.url, state_quota_bytes=20_000) as (mallory, victim, revoke):
            for i in range(100):  # 100 x 50 keys of ~130 bytes: the quota is reached first
                names = [f"lease-{i}-{j}" for j in range(50)]
                leased = await mallory.client.post(
                    "/v1/state/a/leases", json={"keys": names}, headers=mallory.headers
                )
                if leased.status_code != 200:
                    break
            body = _refused(leased, 507, "STATE_QUOTA_EXCEEDED")
            assert 0 < i < 10 and "No lease was granted" in body["message"]
            gone = [{"key": f"ghost-{j}", "delete": True} for j in range(100)]
            _refused(await mallory.commit("a", gone), 507, "STATE_QUOTA_EXCEEDED")
            await victim.works(1)
            await revoke("agent")


async def test_read_logs_and_idempotency_records_count_against_the_quota(tmp_path: Path) -> None:
    # Each session has its own read log and each idempotency key its own record: without a
    # charge, reads in fresh sessions and commits under fresh keys grew Redis without bound.
    with EmbeddedRedis(tmp_path / "redis", persist=False, maxmemory_mb=64) as server:
        async with _gateway(server.url, state_quota_bytes=20_000) as (mallory, victim, revoke):
            for i in range(1_000):  # ~200 bytes each: the quota is reached first
                session = {**mallory.headers, "X-Conclave-Session": f"s{i}"}
                read = await mallory.client.get("/v1/state/a/k", headers=session)
                if read.status_code != 200:
                    break
            body = _refused(read, 507, "STATE_QUOTA_EXCEEDED")
            assert 10 < i < 200 and "Nothing was read or logged" in body["message"]
            # A read the log already holds takes no room: it is still answered.
            again = {**mallory.headers, "X-Conclave-Session": "s0"}
            assert (await mallory.client.get("/v1/state/a/k", headers=again)).status_code == 200
            once = {"writes": [{"key": "n", "op": "increment", "value": 1}], "idempotency_key": "x"}
            refused = await mallory.client.post("/v1/state/a/commit", json=once, headers=again)
            _refused(refused, 507, "STATE_QUOTA_EXCEEDED")
            await victim.works(1)
            await revoke("agent")


async def test_namespaces_count_against_the_quota(tmp_path: Path) -> None:
    with EmbeddedRedis(tmp_path / "redis", persist=False, maxmemory_mb=64) as server:
        async with _gateway(server.url, state_quota_bytes=5_000) as (mallory, victim, revoke):
            for i in range(1_000):  # ~130 bytes each: the quota is reached first
                made = await mallory.client.put(
                    f"/v1/state/flood-{i}", json={}, headers=mallory.headers
                )
                if made.status_code != 201:
                    break
            body = _refused(made, 507, "STATE_QUOTA_EXCEEDED")
            assert 10 < i < 50 and "Nothing was created" in body["message"]
            await victim.works(1)
            await revoke("agent")

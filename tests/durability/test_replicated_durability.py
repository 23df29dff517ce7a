"""Durability "replicated": commits, lease grants and revocations are acknowledged only once a
replica holds them; when none confirms in time the answer is a retryable 503 that the same
idempotency key settles on retry. Durability "async" acknowledges without waiting.

Runs on a real master + replica (`tests.redis_replication`), the gateway in-process.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable

import httpx
import pytest

from agents import GatewayClient, retry_transient
from gateway.identity import generation_key
from gateway.redis_io import connect_redis
from gateway.state import NamespaceKeys, check_namespace_history
from protocol import CommitRequest, ErrorCode, SerfError, StateOp, Write
from tests.durability.conftest import ADMIN, Gateway, durable_settings, gateway
from tests.redis_replication import RedisReplicaPair

pytestmark = pytest.mark.anyio

TIMEOUT_MS = 300
LEDGER = NamespaceKeys("acme", "ledger")


async def _ledger(gw: Gateway) -> None:
    created = await gw.client.put("/v1/state/ledger", json={}, headers=gw.as_agent())
    assert created.status_code == 201, created.text


async def _anomalies(url: str) -> int:
    redis = connect_redis(url)
    try:
        return len((await check_namespace_history(redis, LEDGER)).anomalies)
    finally:
        await redis.aclose()


async def _until_confirmed(
    send: Callable[[], Awaitable[httpx.Response]], attempts: int = 10
) -> httpx.Response:
    """Send again while the answer is DURABILITY_UNCONFIRMED (a busy machine's replica may
    take a moment to catch up after it resumes), as the SDK does."""
    for _ in range(attempts):
        answer = await send()
        if answer.status_code != 503:
            assert answer.status_code == 200, answer.text
            return answer
        assert answer.json()["code"] == "DURABILITY_UNCONFIRMED", answer.text
    raise AssertionError(f"still unconfirmed after {attempts} attempts")


async def test_each_acknowledged_write_is_on_the_replica_when_answered(
    pair: RedisReplicaPair,
) -> None:
    # a generous timeout: the machine may be busy, and this test is about success
    async with gateway(durable_settings(pair.master_url, timeout_ms=5000)) as gw:
        await _ledger(gw)
        registered = await gw.client.post(
            "/v1/agents", json={"tenant": "acme", "agent": "bob"}, headers=ADMIN
        )
        assert registered.status_code == 201, registered.text
        with pair.replica() as replica:
            for i in range(1, 21):
                done = await gw.commit("alice", {"key": "n", "value": i})
                assert done.status_code == 200, (i, done.text)
                assert replica.hget(LEDGER.data("n"), "ver") == str(i)

            granted = await gw.lease("alice", "owned")
            assert granted.status_code == 200, granted.text
            token = granted.json()["leases"][0]["fencing_token"]
            assert replica.hget(LEDGER.data("owned"), "fence") == str(token)

            generation = replica.get(generation_key("acme", "bob"))
            revoked = await gw.client.delete("/v1/agents/acme/bob", headers=ADMIN)
            assert revoked.status_code == 200, revoked.text
            assert int(replica.get(generation_key("acme", "bob")) or 0) == int(generation) + 1


async def test_without_a_replica_confirming_the_answer_is_a_retryable_503_in_time(
    pair: RedisReplicaPair,
) -> None:
    async with gateway(durable_settings(pair.master_url, timeout_ms=TIMEOUT_MS)) as gw:
        await _ledger(gw)
        pair.pause_replica()
        started = time.monotonic()
        refused = await gw.commit(
            "alice", {"key": "count", "value": 1, "op": "increment"}, idempotency_key="c1"
        )
        elapsed_ms = (time.monotonic() - started) * 1000
        error = refused.json()
        assert refused.status_code == 503, refused.text
        assert (error["code"], error["retryable"], error["action"]) == (
            "DURABILITY_UNCONFIRMED",
            True,
            "retry_backoff",
        )
        assert TIMEOUT_MS <= elapsed_ms < TIMEOUT_MS + 1000
        lease = await gw.lease("alice", "owned")
        assert lease.json()["code"] == "DURABILITY_UNCONFIRMED"
        revoke = await gw.client.delete("/v1/agents/acme/bob", headers=ADMIN)
        assert revoke.json()["code"] == "DURABILITY_UNCONFIRMED"

        pair.resume_replica()
        retried = await _until_confirmed(
            lambda: gw.commit(
                "alice", {"key": "count", "value": 1, "op": "increment"}, idempotency_key="c1"
            )
        )
        assert retried.json()["replayed"] is True
        assert retried.json()["values"] == {"count": 1}  # applied once, not twice
        lease = await _until_confirmed(lambda: gw.lease("alice", "owned"))  # renewed: same token
        assert lease.status_code == 200, lease.text
        assert lease.json()["leases"][0]["fencing_token"] == 1
        with pair.replica() as replica:
            assert replica.hget(LEDGER.data("count"), "val") == "1"
            assert replica.hget(LEDGER.data("owned"), "fence") == "1"
        history = await gw.client.get("/v1/state/ledger/history", headers=gw.as_agent())
        assert len(history.json()["entries"]) == 1
    assert await _anomalies(pair.master_url) == 0


async def test_the_sdk_retries_an_unconfirmed_commit_with_its_idempotency_key(
    pair: RedisReplicaPair,
) -> None:
    settings = durable_settings(pair.master_url, timeout_ms=TIMEOUT_MS)
    async with gateway(settings) as gw:
        await _ledger(gw)
        token = gw.as_agent()["Authorization"].removeprefix("Bearer ")
        default = retry_transient()
        seen: list[ErrorCode] = []

        def retry(error: SerfError, attempt: int) -> float | None:
            """The SDK's own decision; the replica comes back once the 503 was answered (a
            timer could let a slow first attempt's WAIT see it back and succeed)."""
            seen.append(error.code)
            pair.resume_replica()
            return default(error, attempt)

        sdk = GatewayClient("http://g", token, transport=gw.transport, retry=retry)
        request = CommitRequest(
            writes=[Write(key="count", value=1, op=StateOp.INCREMENT)], idempotency_key="sdk-1"
        )
        pair.pause_replica()
        try:
            result = await sdk.commit("ledger", request)
        finally:
            pair.resume_replica()
        assert seen == [ErrorCode.DURABILITY_UNCONFIRMED]
        assert result.replayed is True  # the first attempt was applied; the retry returned it
        assert result.values == {"count": 1}
        await sdk.aclose()


async def test_async_mode_acknowledges_without_waiting_for_the_replica(
    pair: RedisReplicaPair,
) -> None:
    async with gateway(durable_settings(pair.master_url, "async", TIMEOUT_MS)) as gw:
        await _ledger(gw)
        pair.pause_replica()
        started = time.monotonic()
        done = await gw.commit("alice", {"key": "n", "value": 1})
        assert done.status_code == 200, done.text
        assert (time.monotonic() - started) * 1000 < TIMEOUT_MS
        granted = await gw.lease("alice", "owned")
        assert granted.status_code == 200, granted.text

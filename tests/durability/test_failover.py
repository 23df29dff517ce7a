"""A master failover (SIGKILL the master, promote its replica, point a gateway at it): what
each durability mode keeps. "replicated" keeps every acknowledged commit and never issues a
fencing token twice; "async" can lose what the replica had not received yet.
"""

from __future__ import annotations

import anyio
import pytest

from gateway.redis_io import connect_redis
from gateway.state import NamespaceKeys, check_namespace_history
from tests.durability.conftest import Gateway, durable_settings, gateway
from tests.redis_replication import RedisReplicaPair

pytestmark = pytest.mark.anyio

LEDGER = NamespaceKeys("acme", "ledger")
LATE = ({"key": "late", "value": 1}, {"key": "count", "value": 1, "op": "increment"})


async def _token_after_expiry(gw: Gateway, agent: str, key: str) -> int:
    """The fencing token `agent` is granted once the key's earlier lease has lapsed."""
    with anyio.fail_after(10):
        while True:
            granted = await gw.lease(agent, key)
            if granted.status_code == 200:
                return int(granted.json()["leases"][0]["fencing_token"])
            assert granted.json()["code"] == "LEASE_HELD", granted.text
            await anyio.sleep(0.05)


async def test_replicated_mode_loses_no_acknowledged_commit_and_reissues_no_token(
    pair: RedisReplicaPair,
) -> None:
    acknowledged: dict[str, int] = {}
    async with gateway(durable_settings(pair.master_url, timeout_ms=2000)) as gw:
        assert (await gw.client.put("/v1/state/ledger", json={}, headers=gw.as_agent())).is_success
        for i in range(30):
            done = await gw.commit(
                "alice",
                {"key": f"k{i}", "value": i},
                {"key": "count", "value": 1, "op": "increment"},
            )
            assert done.status_code == 200, done.text
            acknowledged[f"k{i}"] = done.json()["versions"][f"k{i}"]
        granted = await gw.lease("alice", "owned", ttl_ms=200)
        assert granted.status_code == 200, granted.text
        token = granted.json()["leases"][0]["fencing_token"]
        pair.partition_replica()
        unconfirmed = await gw.commit("alice", *LATE, idempotency_key="late")
        assert unconfirmed.json()["code"] == "DURABILITY_UNCONFIRMED"  # never acknowledged

    pair.kill_master()
    promoted = pair.promote_replica()

    async with gateway(durable_settings(promoted, "async")) as gw:
        # the unconfirmed commit was lost with the master: its retry applies it, once
        retried = await gw.commit("alice", *LATE, idempotency_key="late")
        assert retried.status_code == 200, retried.text
        assert retried.json()["replayed"] is False
        assert retried.json()["values"] == {"count": 31}
        for key, version in acknowledged.items():
            read = await gw.client.get(f"/v1/state/ledger/{key}", headers=gw.as_agent())
            assert read.status_code == 200, read.text
            assert read.json()["version"] == version, key  # 0 lost
        count = await gw.client.get("/v1/state/ledger/count", headers=gw.as_agent())
        assert count.json()["value"] == 31
        assert await _token_after_expiry(gw, "bob", "owned") == token + 1  # not reissued
    client = connect_redis(promoted)
    try:
        assert (await check_namespace_history(client, LEDGER)).anomalies == []
    finally:
        await client.aclose()


async def test_async_mode_can_lose_an_acknowledged_commit_and_reissue_a_token(
    pair: RedisReplicaPair,
) -> None:
    async with gateway(durable_settings(pair.master_url, "async")) as gw:
        assert (await gw.client.put("/v1/state/ledger", json={}, headers=gw.as_agent())).is_success
        kept = await gw.commit("alice", {"key": "before", "value": 1})
        assert kept.status_code == 200, kept.text
        pair.wait_in_sync()
        pair.partition_replica()
        acked = await gw.commit("alice", {"key": "after", "value": 2})
        assert acked.status_code == 200, acked.text  # acknowledged, yet only on the master
        granted = await gw.lease("alice", "owned")
        assert granted.status_code == 200, granted.text
        token = granted.json()["leases"][0]["fencing_token"]

    pair.kill_master()
    promoted = pair.promote_replica()

    async with gateway(durable_settings(promoted, "async")) as gw:
        before = await gw.client.get("/v1/state/ledger/before", headers=gw.as_agent())
        assert before.json()["version"] == 1
        after = await gw.client.get("/v1/state/ledger/after", headers=gw.as_agent())
        assert after.json()["version"] == 0  # the acknowledged commit is gone
        # alice's live lease is gone too: bob is granted the very token alice holds
        assert await _token_after_expiry(gw, "bob", "owned") == token

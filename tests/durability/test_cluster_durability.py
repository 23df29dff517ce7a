"""Durability "replicated" on a Redis Cluster: the WAIT runs on the master owning the script's
slot, so a commit is on that master's replica when it is acknowledged."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
import redis

from conclave.bench.chaos.redis_cluster import LocalRedisCluster
from gateway.state import NamespaceKeys
from tests.durability.conftest import durable_settings, gateway

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalRedisCluster]:
    with LocalRedisCluster() as servers:
        yield servers


def _replica_port(cluster: LocalRedisCluster, key: str) -> int:
    """The port of a replica of the master owning `key`'s slot (waiting for it to attach)."""
    deadline = time.monotonic() + 20
    with redis.Redis(port=cluster.ports[0]) as client:
        slot = int(client.execute_command("CLUSTER", "KEYSLOT", key))
        while time.monotonic() < deadline:
            for start, end, _master, *replicas in client.execute_command("CLUSTER", "SLOTS"):
                if start <= slot <= end and replicas:
                    return int(replicas[0][1])
            time.sleep(0.1)
    raise AssertionError(f"no replica serves slot {slot}")


async def test_a_commit_is_on_its_slots_replica_when_acknowledged(
    cluster: LocalRedisCluster,
) -> None:
    async with gateway(durable_settings(cluster.url, timeout_ms=5000)) as gw:
        created = await gw.client.put("/v1/state/ledger", json={}, headers=gw.as_agent())
        assert created.status_code == 201, created.text
        key = NamespaceKeys("acme", "ledger").data("n")
        with redis.Redis(port=_replica_port(cluster, key), decode_responses=True) as replica:
            replica.execute_command("READONLY")
            for i in range(1, 11):
                done = await gw.commit("alice", {"key": "n", "value": i})
                assert done.status_code == 200, done.text
                assert replica.hget(key, "ver") == str(i)

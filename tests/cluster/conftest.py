"""Every test here runs on a real six-node Redis Cluster (three masters, three replicas).

`redis_url` is overridden with the cluster's `redis+cluster://` URL, so the shared fixtures
(`settings`, `redis`, `client`) give the gateway, in-process, on the cluster.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from conclave.bench.chaos.redis_cluster import LocalRedisCluster


@pytest.fixture(scope="session")
def redis_cluster() -> Iterator[LocalRedisCluster]:
    with LocalRedisCluster() as cluster:
        yield cluster


@pytest.fixture(scope="session")
def redis_url(redis_cluster: LocalRedisCluster) -> str:
    return redis_cluster.url

"""Seeded random schedules of concurrent agents on real Redis, checked by the history checker.

The same schedule runs against the Conclave store and against the naive last-writer-wins
store: the checker must find nothing in the first and must catch the second.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any, Protocol

import anyio
import anyio.lowlevel
import pytest
from redis.asyncio import Redis

from conclave.bench.contention.baselines import NaiveStore
from gateway.config import Settings
from gateway.gateway_error import GatewayError
from gateway.state import Actor, NamespaceKeys, StateStore, check_namespace_history
from protocol.state import CommitRequest, NamespaceConfig, Write

pytestmark = pytest.mark.anyio

KEYS = ("x", "y", "z")


class Backend(Protocol):
    async def read(self, agent: int, key: str) -> tuple[Any, int]: ...

    async def commit(self, agent: int, writes: dict[str, Any]) -> list[str]:
        """Apply; [] on success, else the keys to read again."""
        ...


@dataclass
class ConclaveBackend:
    store: StateStore
    ns: str
    refusals: int = 0

    def actor(self, agent: int) -> Actor:
        return Actor("acme", f"agent-{agent}", f"session-{agent}")

    async def read(self, agent: int, key: str) -> tuple[Any, int]:
        result = await self.store.read(self.actor(agent), self.ns, key)
        return result.value, result.version

    async def commit(self, agent: int, writes: dict[str, Any]) -> list[str]:
        request = CommitRequest(writes=[Write(key=k, value=v) for k, v in writes.items()])
        try:
            await self.store.commit(self.actor(agent), self.ns, request)
        except GatewayError as exc:
            assert exc.error.code == "STATE_CONFLICT"
            self.refusals += 1
            return [c["key"] for c in exc.error.details["conflicts"]]
        return []


@dataclass
class NaiveBackend:
    store: NaiveStore
    reads: dict[int, dict[str, int]] = field(default_factory=dict)

    async def read(self, agent: int, key: str) -> tuple[Any, int]:
        value, version = await self.store.read(key)
        self.reads.setdefault(agent, {})[key] = version
        return value, version

    async def commit(self, agent: int, writes: dict[str, Any]) -> list[str]:
        read_set = self.reads.pop(agent, {})
        await self.store.commit(f"agent-{agent}", f"session-{agent}", writes, read_set)
        return []


@dataclass
class Txn:
    """Read some keys one step at a time, then write one key computed from them."""

    to_read: list[str]
    target: str
    seen: dict[str, int] = field(default_factory=dict)
    pending: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.pending = list(self.to_read)


def _new_txn(rng: random.Random) -> Txn:
    return Txn(rng.sample(KEYS, rng.randint(1, 2)), rng.choice(KEYS))


async def _step(backend: Backend, agent: int, txn: Txn, rng: random.Random) -> Txn:
    """Advance one agent by one operation; return its transaction after the step."""
    if txn.pending:
        key = txn.pending.pop(0)
        value, _ = await backend.read(agent, key)
        txn.seen[key] = int(value or 0)
        return txn
    value = sum(txn.seen.values()) + 1  # a write that depends on everything read
    stale = await backend.commit(agent, {txn.target: value})
    if stale:
        txn.pending = list(dict.fromkeys([*stale, *txn.to_read]))
        return txn
    return _new_txn(rng)


async def _run_schedule(backend: Backend, seed: int, agents: int = 4, steps: int = 120) -> None:
    rng = random.Random(seed)
    txns = [_new_txn(rng) for _ in range(agents)]
    for _ in range(steps):
        agent = rng.randrange(agents)
        txns[agent] = await _step(backend, agent, txns[agent], rng)


async def _backends(redis: Redis, seed: int) -> tuple[ConclaveBackend, NaiveBackend]:
    store = StateStore.from_settings(redis, Settings(max_value_bytes=1024))
    ns = f"sched-{seed}"
    await store.create_namespace("acme", ns, NamespaceConfig())
    naive = NaiveStore(redis, NamespaceKeys("acme", f"naive-{seed}"))
    return ConclaveBackend(store, ns), NaiveBackend(naive)


@pytest.mark.parametrize("seed", range(8))
async def test_random_schedules_serializable_on_conclave_caught_on_naive(
    redis: Redis, seed: int
) -> None:
    conclave, naive = await _backends(redis, seed)
    await _run_schedule(conclave, seed)
    await _run_schedule(naive, seed)
    good = await check_namespace_history(redis, NamespaceKeys("acme", conclave.ns))
    bad = await check_namespace_history(redis, naive.store.keys)
    assert good.commits >= 10 and good.anomalies == [], [str(a) for a in good.anomalies]
    assert conclave.refusals > 0  # the schedule did contend, and Conclave refused
    assert bad.commits > good.commits  # naive never refuses, so it commits every attempt
    assert bad.count("stale_read") > 0, "the same schedule must expose the naive store"


async def _increment_forever(backend: Backend, agent: int, rounds: int, seed: int) -> int:
    """A shared counter incremented by truly concurrent tasks; returns commits applied."""
    rng = random.Random(seed * 100 + agent)
    done = 0
    while done < rounds:
        value, _ = await backend.read(agent, "counter")
        if rng.random() < 0.5:
            await anyio.lowlevel.checkpoint()  # let others in between the read and the write
        if not await backend.commit(agent, {"counter": int(value or 0) + 1}):
            done += 1
    return done


@pytest.mark.parametrize("seed", [1, 2])
async def test_concurrent_counter_loses_no_update_on_conclave_only(redis: Redis, seed: int) -> None:
    conclave, naive = await _backends(redis, seed)
    for backend in (conclave, naive):
        async with anyio.create_task_group() as tasks:
            for agent in range(6):
                tasks.start_soon(_increment_forever, backend, agent, 15, seed)
    total = 6 * 15
    assert (await conclave.read(0, "counter"))[0] == total
    assert (await naive.read(0, "counter"))[0] < total  # lost updates
    good = await check_namespace_history(redis, NamespaceKeys("acme", conclave.ns))
    bad = await check_namespace_history(redis, naive.store.keys)
    assert (good.commits, good.anomalies) == (total, [])
    assert bad.count("stale_read") > 0

"""What one agent of the contention suite does, per mode: transactions until the run is done.

A transaction reads the keys of its workload, computes one write from them and commits it:

- ``counter``: every agent increments one shared key;
- ``dedicated``: every agent increments its own key (no contention: the floor);
- ``cross``: agent i reads ``x[i % 4]`` and writes ``x[(i + 1) % 4]`` = read + 1, so the key it
  read is being written by other agents (the read-then-write anomaly naive stores let by).

Modes: ``optimistic`` (HTTP: an agent GETs a key it knows nothing of, then POSTs commits
declaring the versions it knows in ``read_set``; a 409 lists each stale key's current value
and version, and the retry commits from them at once), ``owned`` (HTTP: lease the written
key, then a batch of commits with the fencing token, then release; ``LEASE_HELD`` backs off
and retries), ``naive`` (the last-writer-wins store, straight on Redis) and ``watch``
(WATCH/MULTI/EXEC on Redis, retried at once after an abort, or with the agents' `Backoff`).
The ops runs (`run_op_agent`) commit a state op (``increment`` or ``append``) on one hot key
with no read: such commits never conflict, so they never retry.
Commit latency is the time of the commit request (for ``watch``, of the whole transaction);
transaction latency, from the start of a transaction to its commit, includes the refused
attempts, the backoff between them and an owner's wait for its lease.
"""

from __future__ import annotations

import json
import random
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.lowlevel
from redis.asyncio import Redis

from conclave.bench.contention.baselines import NaiveStore, watch_multi_transaction
from conclave.bench.core import Http1Connection, encode_request
from gateway.state import NamespaceKeys

CROSS_KEYS = 4


class LeaseLost(Exception):
    """The owner's lease lapsed mid-batch (a slow machine): acquire it again."""


@dataclass
class RunProgress:
    target: int
    limit_s: float = float("inf")  # a run also ends after this long, so slow machines finish
    pace_s: float = 0.0  # think time between an agent's transactions (0: saturate)
    owned_batch: int = 8  # commits an owner makes per lease before handing the key on
    commits: int = 0
    conflicts: int = 0  # 409 answers (STATE_CONFLICT, LEASE_HELD, ...)
    retries: int = 0  # transactions redone (after a 409 or a WATCH abort)
    latencies_ms: list[float] = field(default_factory=list)  # commit requests
    transactions_ms: list[float] = field(default_factory=list)  # first attempt to commit
    started: float = field(default_factory=time.perf_counter)

    @property
    def done(self) -> bool:
        return self.commits >= self.target or time.perf_counter() - self.started > self.limit_s


def plan(workload: str, agent: int) -> tuple[list[str], str]:
    """(keys read, key written) of one agent's transactions."""
    if workload == "counter":
        return ["counter"], "counter"
    if workload == "dedicated":
        return [f"own-{agent}"], f"own-{agent}"
    return [f"x{agent % CROSS_KEYS}"], f"x{(agent + 1) % CROSS_KEYS}"


def next_value(values: dict[str, Any]) -> int:
    return sum(int(v or 0) for v in values.values()) + 1


@dataclass
class Backoff:
    """The wait before retrying a conflicted transaction: full jitter, doubling from 1 ms up to
    250 ms, as a SERF client does on a retryable conflict: racing again at once mostly loses
    again to the same herd. A low cap keeps a herd of 64 agents racing (a 64 ms cap: ~50
    commits/s). The HTTP agents and the WATCH/MULTI baseline wait alike."""

    rng: random.Random
    wait_s: float = 0.001

    async def __call__(self) -> None:
        await anyio.sleep(self.wait_s * self.rng.random())
        self.wait_s = min(self.wait_s * 2, 0.25)


class RequestFailed(RuntimeError):
    """The gateway answered with a status the agent does not handle."""


@dataclass
class HttpAgent:
    """One agent on its own kept-alive connection (its requests are sequential), through the
    bench's lean HTTP/1.1 client: httpx's client CPU would otherwise be what the suite
    measures on two shared cores (see `conclave.bench.core.http1`)."""

    connection: Http1Connection
    base_url: str
    headers: dict[str, str]
    namespace: str
    run: RunProgress
    rng: random.Random = field(default_factory=random.Random)
    known: dict[str, tuple[Any, int]] = field(default_factory=dict)  # key -> (value, version)

    async def _send(
        self, method: str, path: str, body: Any = None, *, ok: tuple[int, ...] = (200,)
    ) -> tuple[int, Any]:
        """One request; its status (one of `ok`) and decoded answer. A commit resent
        on a new connection (the client does when the server closed an idle one) carries its
        idempotency key, so it cannot apply twice."""
        payload = b"" if body is None else json.dumps(body).encode()
        raw = encode_request(
            method, self.base_url, f"/v1/state/{self.namespace}/{path}", self.headers, payload
        )
        status, answer = await self.connection.request(raw)
        if status not in ok:
            raise RequestFailed(f"{method} {path}: {status} {answer.decode(errors='replace')}")
        return status, json.loads(answer) if answer else None

    async def read(self, key: str) -> Any:
        _, read = await self._send("GET", key)
        self.known[key] = (read["value"], read["version"])
        return read["value"]

    async def commit(
        self, target: str, value: int, token: int | None, read_set: dict[str, int]
    ) -> dict[str, Any]:
        write: dict[str, Any] = {"key": target, "value": value}
        if token is not None:
            write["fencing_token"] = token
        body = {"writes": [write], "read_set": read_set, "idempotency_key": uuid.uuid4().hex}
        started = time.perf_counter()
        _, outcome = await self._send("POST", "commit", body, ok=(200, 409))
        self.run.latencies_ms.append((time.perf_counter() - started) * 1000)
        return dict(outcome)

    async def transaction(
        self, reads: list[str], target: str, token: int | None, began: float | None = None
    ) -> None:
        """One committed transaction, from what the agent knows of its keys (read, committed
        by itself, or shown by a 409), declared as its read_set: the commit checks each is
        still current, so a stale one is refused with the current value and version, and the
        retry computes from those: one request per attempt, no reading again. `began`: when
        the transaction started, if before this call (an owner's wait for its lease)."""
        backoff = Backoff(self.rng)
        began = began or time.perf_counter()
        shown: set[str] = set()  # keys a 409 listed: declared too, even one the agent only
        # wrote (the gateway logs a writer's keys as read), or the log's shown entry refuses
        while not self.run.done:
            for key in reads:
                if key not in self.known:
                    await self.read(key)
            values = {key: self.known[key][0] for key in reads}
            read_set = {key: self.known[key][1] for key in [*reads, *shown]}
            value = next_value(values)
            outcome = await self.commit(target, value, token, read_set)
            if "commit_id" in outcome:
                self.known[target] = (value, outcome["versions"][target])
                self.run.commits += 1
                self.run.transactions_ms.append((time.perf_counter() - began) * 1000)
                return
            self.run.conflicts += 1
            self.run.retries += 1
            for stale in outcome.get("details", {}).get("conflicts", []):
                if "current_version" in stale:
                    shown.add(stale["key"])
                    self.known[stale["key"]] = (
                        stale.get("current_value"),
                        stale["current_version"],
                    )
            if outcome["code"] in ("LEASE_EXPIRED", "FENCED"):
                raise LeaseLost(outcome["message"])
            if outcome["code"] != "STATE_CONFLICT":
                raise RuntimeError(f"unexpected refusal {outcome['code']}: {outcome['message']}")
            await backoff()

    async def apply_op(self, key: str, op: str, operand: Any) -> None:
        """One commit of `op` on `key`; an op commit is never refused for a conflict."""
        body = {
            "writes": [{"key": key, "op": op, "value": operand}],
            "idempotency_key": uuid.uuid4().hex,
        }
        started = time.perf_counter()
        await self._send("POST", "commit", body)
        self.run.latencies_ms.append((time.perf_counter() - started) * 1000)
        self.run.transactions_ms.append(self.run.latencies_ms[-1])
        self.run.commits += 1

    async def lease(self, key: str, rng: random.Random) -> int:
        backoff_s = 0.004
        while True:
            if self.run.done:
                raise LeaseLost("the run is over")
            status, answer = await self._send(
                "POST", "leases", {"keys": [key], "ttl_ms": 5000}, ok=(200, 409)
            )
            if status == 200:
                token: int = answer["leases"][0]["fencing_token"]
                return token
            self.run.conflicts += 1
            await anyio.sleep(backoff_s * (0.5 + rng.random()))
            backoff_s = min(backoff_s * 2, 0.25)

    async def release(self, key: str) -> None:
        await self._send("DELETE", f"leases/{key}", ok=(204,))


async def run_http_agent(agent: HttpAgent, workload: str, index: int, owned: bool) -> None:
    reads, target = plan(workload, index)
    rng = agent.rng
    if not owned:
        while not agent.run.done:
            await agent.transaction(reads, target, None)
            await _think(agent.run, rng)
        return
    while not agent.run.done:
        try:
            began = time.perf_counter()  # the first transaction waits for the lease too
            token = await agent.lease(target, rng)
            for n in range(agent.run.owned_batch):
                if n:
                    await _think(agent.run, rng)
                    began = time.perf_counter()
                await agent.transaction(reads, target, token, began)
        except LeaseLost:
            continue
        await agent.release(target)
        await _think(agent.run, rng)  # think without holding the lease
        await anyio.lowlevel.checkpoint()  # give waiting agents a chance at the lease


async def _think(run: RunProgress, rng: random.Random) -> None:
    if run.pace_s and not run.done:
        await anyio.sleep(run.pace_s * (0.5 + rng.random()))


async def run_naive_agent(store: NaiveStore, workload: str, index: int, run: RunProgress) -> None:
    reads, target = plan(workload, index)
    while not run.done:
        read_set: dict[str, int] = {}
        values: dict[str, Any] = {}
        for key in reads:
            values[key], read_set[key] = await store.read(key)
        started = time.perf_counter()
        await store.commit(f"agent-{index}", "bench", {target: next_value(values)}, read_set)
        run.latencies_ms.append((time.perf_counter() - started) * 1000)
        run.transactions_ms.append(run.latencies_ms[-1])
        run.commits += 1


async def run_op_agent(agent: HttpAgent, op: str, index: int) -> None:
    """Commit `op` on the one hot key until the run is done: ``increment`` by 1, ``append``
    of a value unique to this agent and commit."""
    key = "counter" if op == "increment" else "list"
    n = 0
    while not agent.run.done:
        await agent.apply_op(key, op, 1 if op == "increment" else f"{index}-{n}")
        n += 1


async def run_watch_agent(
    redis: Redis,
    keys: NamespaceKeys,
    workload: str,
    index: int,
    run: RunProgress,
    backoff_seed: int | None = None,
) -> None:
    """WATCH/MULTI transactions; with `backoff_seed`, each retry waits as the HTTP agents'
    do (`Backoff`), else it retries at once."""
    reads, target = plan(workload, index)
    rng = random.Random(backoff_seed)
    while not run.done:
        started = time.perf_counter()
        retries = await watch_multi_transaction(
            redis,
            keys,
            reads,
            lambda values: {target: next_value(values)},
            Backoff(rng) if backoff_seed is not None else None,
        )
        run.latencies_ms.append((time.perf_counter() - started) * 1000)
        run.transactions_ms.append(run.latencies_ms[-1])
        run.retries += retries
        run.commits += 1

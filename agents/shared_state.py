"""`SharedState`: read-modify-write transactions on a gateway namespace, retried on conflict.

A transaction reads its keys through the gateway (the gateway logs those reads), computes
new values, and commits them with the versions it read as `read_set` and
`expected_version`. If another agent committed one of those keys in between, the gateway
refuses with 409 `STATE_CONFLICT` (action `reread_and_retry`) and the transaction starts
over from fresh reads: an update is retried, never lost. In an `owned` namespace it first
takes the keys' leases and writes with their fencing tokens; a lease held by someone else
(`LEASE_HELD`, `retry_backoff`) is waited out. A transaction that still conflicts after
`max_attempts` raises `RecoveryFailed`.
"""

from __future__ import annotations

import inspect
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from typing import Any

import anyio

from agents.client import GatewayClient
from agents.recovery import RecoveryHooks, RecoveryPolicy, RecoveryStep
from protocol.serf import SerfError
from protocol.state import CommitRequest, ReadResult, Write

Values = dict[str, Any]
Update = Callable[[Values], Values | Awaitable[Values]]


@dataclass(frozen=True)
class TransactionResult:
    values: Values  # what was committed
    versions: dict[str, int]  # the keys' versions after the commit
    attempts: int  # 1 when nobody interfered
    conflicts: int  # refusals (409) that forced a reread


class SharedState:
    """One agent's view of a namespace in the gateway's store."""

    def __init__(
        self,
        client: GatewayClient,
        namespace: str,
        *,
        leases: bool = False,
        lease_ttl_ms: int = 10_000,
        max_attempts: int = 50,
        seed: int = 0,
    ) -> None:
        self.client = client
        self.namespace = namespace
        self.leases = leases
        self.lease_ttl_ms = lease_ttl_ms
        self.policy = RecoveryPolicy(max_attempts=max_attempts, base_delay_ms=5, seed=seed)

    async def get(self, key: str, default: Any = None) -> Any:
        read = await self.client.read(self.namespace, key)
        return read.value if read.version > 0 else default

    async def transact(self, keys: list[str], update: Update) -> TransactionResult:
        """Apply `update` to the current values of `keys` atomically, retrying on conflict.

        Recovery follows the SERF action through `RecoveryPolicy`: `reread_and_retry` and
        `reacquire` start the attempt over (it rereads and re-leases), `retry_backoff`
        (a lease held by someone else) waits first; anything else is raised.
        """
        idempotency = uuid.uuid4().hex
        trace: list[RecoveryStep] = []

        async def again(_error: SerfError) -> None:
            return None  # the attempt itself rereads (and re-leases): run it again

        async def attempt() -> TransactionResult:
            return await self._attempt(keys, update, len(trace) + 1, idempotency)

        hooks = RecoveryHooks[TransactionResult](reread=again, reacquire=again)
        result = await self.policy.run(attempt, hooks, trace=trace)
        return replace(result, conflicts=len(trace))

    async def _read_all(self, keys: list[str]) -> dict[str, ReadResult]:
        """Read the keys concurrently: one round trip of latency, not one per key."""
        reads: dict[str, ReadResult] = {}

        async def read(key: str) -> None:
            reads[key] = await self.client.read(self.namespace, key)

        async with anyio.create_task_group() as group:
            for key in keys:
                group.start_soon(read, key)
        return {key: reads[key] for key in keys}

    async def _attempt(
        self, keys: list[str], update: Update, attempt: int, idempotency: str
    ) -> TransactionResult:
        fencing: dict[str, int] = {}
        if self.leases:
            grants = await self.client.acquire(self.namespace, keys, self.lease_ttl_ms)
            fencing = {grant.key: grant.fencing_token for grant in grants.leases}
        try:
            reads = await self._read_all(keys)
            current = {key: r.value for key, r in reads.items() if r.version > 0}
            produced = update(current)
            new_values = await produced if inspect.isawaitable(produced) else produced
            writes = [
                Write(
                    key=key,
                    value=value,
                    expected_version=reads[key].version if key in reads else None,
                    fencing_token=fencing.get(key),
                )
                for key, value in new_values.items()
            ]
            request = CommitRequest(
                writes=writes,
                read_set={key: r.version for key, r in reads.items()},
                idempotency_key=f"{idempotency}-{attempt}",
            )
            result = await self.client.commit(self.namespace, request)
        finally:
            if self.leases:
                for key in fencing:
                    await self.client.release(self.namespace, key)
        return TransactionResult(dict(new_values), result.versions, attempt, 0)

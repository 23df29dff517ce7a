"""`SharedState`: read-modify-write transactions on a gateway namespace, retried on conflict.

A transaction reads its keys through the gateway (the gateway logs those reads), computes
new values, and commits them with the versions it read as `read_set` and
`expected_version`. If another agent committed one of those keys in between, the gateway
refuses with 409 `STATE_CONFLICT` (action `reread_and_retry`) listing each stale key's
current value and version, and the transaction starts over from those (no reread: one
request per retry, the versions declared in `read_set`): an update is retried, never lost.
In an `owned` namespace it first
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
from protocol import CommitRequest, ErrorCode, ReadResult, SerfError, Write

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
        carried: dict[str, ReadResult] = {}  # reads the next attempt may reuse, see `again`

        async def again(error: SerfError) -> None:
            # A STATE_CONFLICT lists every stale key with its current value and version, read
            # in the commit's own script: the retry reuses them and the previous attempt's
            # other reads (current then, and declared again in read_set, so re-checked), one
            # request instead of a reread. Anything else rereads everything.
            carried.clear()
            if self.leases or error.code != ErrorCode.STATE_CONFLICT:
                return None
            for stale in error.details.get("conflicts", []):
                if stale.get("current_version") is None:
                    return None
                carried[stale["key"]] = ReadResult(
                    namespace=self.namespace,
                    key=stale["key"],
                    value=stale.get("current_value"),
                    version=stale["current_version"],
                )
            carried.update({k: r for k, r in previous.items() if k not in carried})
            return None

        previous: dict[str, ReadResult] = {}

        async def attempt() -> TransactionResult:
            reuse = dict(carried)
            carried.clear()
            return await self._attempt(keys, update, len(trace) + 1, idempotency, reuse, previous)

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
        self,
        keys: list[str],
        update: Update,
        attempt: int,
        idempotency: str,
        reuse: dict[str, ReadResult],
        previous: dict[str, ReadResult],
    ) -> TransactionResult:
        fencing: dict[str, int] = {}
        if self.leases:
            grants = await self.client.acquire(self.namespace, keys, self.lease_ttl_ms)
            fencing = {grant.key: grant.fencing_token for grant in grants.leases}
        try:
            missing = [key for key in keys if key not in reuse]
            known = reuse | (await self._read_all(missing) if missing else {})
            reads = {key: known[key] for key in keys}
            previous.clear()
            previous.update(known)
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
                # every key a 409 showed is declared, even one outside `keys` (a stale read
                # logged earlier in the session), or the shown entry in the log refuses again
                read_set={key: r.version for key, r in known.items()},
                idempotency_key=f"{idempotency}-{attempt}",
            )
            result = await self.client.commit(self.namespace, request)
        finally:
            if self.leases:
                for key in fencing:
                    await self.client.release(self.namespace, key)
        return TransactionResult(dict(new_values), result.versions, attempt, 0)

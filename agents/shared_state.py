"""`SharedState`: read-modify-write transactions on a gateway namespace, retried on conflict.

A transaction reads its keys through the gateway (the gateway logs those reads), computes
new values, and commits them with the versions it read as `read_set` and
`expected_version`. If another agent committed one of those keys in between, the gateway
refuses with 409 `STATE_CONFLICT` (action `reread_and_retry`) and the transaction starts
over from fresh reads: an update is retried, never lost. In an `owned` namespace it first
takes the keys' leases and writes with their fencing tokens; a lease held by someone else
(`LEASE_HELD`, `retry_backoff`) is waited out.
"""

from __future__ import annotations

import inspect
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import anyio

from agents.client import GatewayClient
from agents.errors import StateConflict
from protocol.serf import RecoveryAction
from protocol.state import CommitRequest, Write

Values = dict[str, Any]
Update = Callable[[Values], Values | Awaitable[Values]]
_RETRY_ACTIONS = (
    RecoveryAction.REREAD_AND_RETRY,
    RecoveryAction.REACQUIRE,
    RecoveryAction.RETRY_BACKOFF,
    RecoveryAction.RETRY_SAME,
)


@dataclass(frozen=True)
class TransactionResult:
    values: Values  # what was committed
    versions: dict[str, int]  # the keys' versions after the commit
    attempts: int  # 1 when nobody interfered
    conflicts: int  # refusals (409) that forced a reread


class TransactionAborted(RuntimeError):
    """Still conflicting after `max_attempts` rereads."""


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
    ) -> None:
        self.client = client
        self.namespace = namespace
        self.leases = leases
        self.lease_ttl_ms = lease_ttl_ms
        self.max_attempts = max_attempts

    async def get(self, key: str, default: Any = None) -> Any:
        read = await self.client.read(self.namespace, key)
        return read.value if read.version > 0 else default

    async def transact(self, keys: list[str], update: Update) -> TransactionResult:
        """Apply `update` to the current values of `keys` atomically, retrying on conflict."""
        conflicts = 0
        idempotency = uuid.uuid4().hex
        for attempt in range(1, self.max_attempts + 1):
            try:
                return await self._attempt(keys, update, attempt, conflicts, idempotency)
            except StateConflict as exc:
                if exc.action not in _RETRY_ACTIONS:
                    raise
                conflicts += 1
                wait_ms = exc.serf.retry_after_ms or min(200, 5 * 2 ** min(attempt, 5))
                if exc.action is not RecoveryAction.REREAD_AND_RETRY:
                    await anyio.sleep(wait_ms / 1000)
        raise TransactionAborted(
            f"{self.namespace}: {keys} still conflicting after {self.max_attempts} attempts"
        )

    async def _attempt(
        self, keys: list[str], update: Update, attempt: int, conflicts: int, idempotency: str
    ) -> TransactionResult:
        fencing: dict[str, int] = {}
        if self.leases:
            grants = await self.client.acquire(self.namespace, keys, self.lease_ttl_ms)
            fencing = {grant.key: grant.fencing_token for grant in grants.leases}
        try:
            reads = {key: await self.client.read(self.namespace, key) for key in keys}
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
        return TransactionResult(dict(new_values), result.versions, attempt, conflicts)

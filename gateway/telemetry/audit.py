"""The audit log: one record per request, in Redis streams every replica appends to.

Who (tenant, agent, on behalf of whom, and an admin who acted as the agent: `acted_by`),
what (transport, operation, tool), the outcome (ok, refused before anything ran, failed while
running, or cancelled: its caller cancelled it or went away, and its work was stopped), the
SERF code, the duration and the call's usage.

One stream per tenant, so no party can push another's records out: each tenant's stream
(`audit_stream(tenant)`, in the tenant's hash slot) keeps about its newest `max_records`
(`Settings.audit_stream_max`; XADD MAXLEN ~, so Redis trims whole nodes and may keep a few
more), and requests refused before a tenant was known (no token, a bad one) go to their own
stream of the same bound. `query` reads one tenant's stream by time (stream entry ids are the
epoch ms they were written at). Every record is also copied to a short feed of the newest
`FEED_RECORDS` of all tenants, which the console shows live and which `query` reads when no
tenant is named: a flood of refusals pushes records out of the feed, never out of their
tenant's stream. Retention is by count, not by age: export a tenant's stream (XREAD from the
last id seen) where records must be kept longer.

Bounded, so unauthenticated callers cannot grow it: the connection layer's refusals are
written under a rate limit (`gateway.http.connections`); every string field is cut to
`MAX_FIELD_CHARS` (with a marker saying how much was cut: a caller chooses a tool's name, a
namespace, a session id), and each stream is capped.

`AuditWriter` takes records off the request's path: the account stage hands a record over
and returns; a background task appends whatever has gathered in one pipelined round trip.
A record is in the streams a few milliseconds after its answer left; `flush` waits for that.
The same round trip counts the records in the per-minute series of `gateway.telemetry.call_series`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Literal, cast

from pydantic import BaseModel, ConfigDict, Field, field_validator
from redis.asyncio import Redis

from gateway.telemetry.call_series import series_commands

log = logging.getLogger("conclave.gateway.audit")

FEED_STREAM = "conclave:audit:feed"
ANONYMOUS_STREAM = "conclave:audit:anonymous"
MAX_RECORDS = 100_000
FEED_RECORDS = 10_000
QUERY_PAGE = 1_000
MAX_FIELD_CHARS = 256
BATCH_WINDOW_S = 0.005
MAX_BATCH = 500  # records a round trip
Command = tuple[str | int, ...]  # a Redis command's words
SendCommands = Callable[[Sequence[Command]], Awaitable[object]]  # sends them in one round trip
Outcome = Literal["ok", "refused", "failed", "cancelled"]


class AuditRecord(BaseModel):
    model_config = ConfigDict(extra="ignore")

    id: str = ""
    at_ms: int
    trace_id: str
    tenant: str = ""
    agent: str = ""
    obo: str = ""
    session: str = ""
    transport: str
    operation: str
    tool: str = ""
    namespace: str = ""
    a2a_agent: str = ""  # the A2A agent the request went to
    # Whom the caller acted for, "tenant/agent", the first delegator first: the verified
    # delegation chain it came with (`gateway.delegation`); empty when it acted for itself.
    chain: list[str] = Field(default_factory=list)
    outcome: Outcome
    code: str = ""
    stage: str = ""
    duration_ms: float
    usage: dict[str, Any] | None = None
    deadline_ms: int | None = None  # the run's deadline (epoch ms), when it had one
    granted_ms: int | None = None  # the time budget the call was granted
    acted_by: str = ""  # an admin who made the call as the agent (the console's try form)
    # ATBA's wait-or-hedge decision for an idempotent tool's call, and what the hedge did:
    # decision, reason, after_ms, started, not_started, winner, loser_ms.
    hedge: dict[str, Any] | None = None
    # A call held for approval (`gateway.approvals`), asked or decided: its id, the policy
    # and its reason, the arguments' digest, the decision and the approver's note.
    approval: dict[str, Any] | None = None
    # A connection-layer refusal's (`gateway.http.connections`): the client's address,
    # and how many refusals before this one were left out of the audit by its rate limit.
    peer: str = ""
    dropped: int = 0

    # The fields a caller's text reaches (the rest are the gateway's own, or a verified token's).
    @field_validator(
        "obo", "session", "operation", "tool", "namespace", "a2a_agent", "peer", mode="before"
    )
    @classmethod
    def _capped(cls, value: Any) -> Any:
        return capped(value) if isinstance(value, str) else value


def capped(text: str, limit: int = MAX_FIELD_CHARS) -> str:
    """`text` if it has at most `limit` characters, else its start and a marker saying how
    many were cut, `limit` characters in all (so capping twice changes nothing)."""
    if len(text) <= limit:
        return text
    marker = f"...[{len(text)} chars, cut]"
    return text[: limit - len(marker)] + marker


def audit_stream(tenant: str) -> str:
    """The stream a tenant's records go to; "" (no tenant known) is the unauthenticated one."""
    return f"conclave:audit:{{t:{tenant}}}" if tenant else ANONYMOUS_STREAM


class AuditLog:
    def __init__(self, redis: Redis, max_records: int = MAX_RECORDS) -> None:
        self.redis = redis
        self.max_records = max_records
        self.feed_records = min(max_records, FEED_RECORDS)
        self._cap = ("MAXLEN", "~", max_records)  # trimmed by whole nodes (XADD's own words)
        self._feed_cap = ("MAXLEN", "~", self.feed_records)

    def commands(self, records: Sequence[AuditRecord]) -> list[Command]:
        """The Redis commands appending `records` (and counting them in the per-minute series)."""
        commands: list[Command] = []
        for record in records:
            # One JSON field per entry: a fraction of the encoding work of one per column.
            record_json = record.model_dump_json(exclude={"id"})
            stream = audit_stream(record.tenant)
            commands.append(("XADD", stream, *self._cap, "*", "record", record_json))
            commands.append(("XADD", FEED_STREAM, *self._feed_cap, "*", "record", record_json))
        return commands + series_commands(records)  # the console's per-minute charts

    async def append(self, *records: AuditRecord) -> None:
        """Append `records` in one round trip (a pipeline without a transaction)."""
        async with self.redis.pipeline(transaction=False) as pipe:
            for command in self.commands(records):
                pipe.execute_command(*command)
            await pipe.execute()

    async def query(
        self,
        *,
        tenant: str | None = None,
        agent: str | None = None,
        tool: str | None = None,
        outcome: str | None = None,
        code: str | None = None,
        since_ms: int | None = None,
        until_ms: int | None = None,
        limit: int = 100,
    ) -> list[AuditRecord]:
        """Newest first: up to `limit` records matching every given filter, written between
        `since_ms` and `until_ms` (epoch ms, both included). With a `tenant` ("" for the
        unauthenticated), its whole stream is searched; without, the feed of the newest
        records of all tenants."""
        given = {"agent": agent, "tool": tool, "outcome": outcome, "code": code}
        wanted = {k: v for k, v in given.items() if v is not None}
        stream = FEED_STREAM if tenant is None else audit_stream(tenant)
        newest = "+" if until_ms is None else str(until_ms)  # ids are "<ms>-<seq>"
        oldest = "-" if since_ms is None else str(since_ms)
        found: list[AuditRecord] = []
        while len(found) < limit:
            entries = cast(
                list[tuple[str, dict[str, str]]],
                await self.redis.xrevrange(stream, max=newest, min=oldest, count=QUERY_PAGE),
            )
            for entry_id, fields in entries:
                raw = json.loads(fields.get("record", "{}"))
                if any(raw.get(k) != v for k, v in wanted.items()):
                    continue
                found.append(AuditRecord.model_validate({**raw, "id": entry_id}))
                if len(found) >= limit:
                    break
            if len(entries) < QUERY_PAGE:
                break
            newest = f"({entries[-1][0]}"
        return found

    async def newest(self, count: int, *, before: str | None = None) -> list[AuditRecord]:
        """Newest first: up to `count` records of the feed, only those older than the entry id
        `before` when it is given (so a reader pages back through the feed a window at a time)."""
        entries = cast(
            list[tuple[str, dict[str, str]]],
            await self.redis.xrevrange(
                FEED_STREAM, max=f"({before}" if before else "+", count=count
            ),
        )
        return [_parsed(entry_id, fields) for entry_id, fields in entries]

    async def last_id(self) -> str:
        """The newest feed record's entry id; "0-0" while the feed is empty."""
        newest = await self.redis.xrevrange(FEED_STREAM, count=1)
        return str(newest[0][0]) if newest else "0-0"

    async def tail(self, after: str, *, count: int, block_ms: int) -> list[AuditRecord]:
        """Oldest first: up to `count` feed records newer than the entry id `after`, waiting up
        to `block_ms` for the first of them (XREAD BLOCK); none when none came."""
        answer = await self.redis.xread({FEED_STREAM: after}, count=count, block=block_ms)
        if not answer:
            return []
        entries = cast(list[tuple[str, dict[str, str]]], cast(list[Any], answer)[0][1])
        return [_parsed(entry_id, fields) for entry_id, fields in entries]


def _parsed(entry_id: str, fields: dict[str, str]) -> AuditRecord:
    return AuditRecord.model_validate({**json.loads(fields.get("record", "{}")), "id": entry_id})


class AuditWriter:
    """Appends audit records in batches from one background task."""

    def __init__(
        self, audit: AuditLog, max_pending: int = 100_000, send: SendCommands | None = None
    ) -> None:
        self.audit = audit
        # What sends a batch's commands: the gateway passes its shared Redis connection's
        # (`gateway.redis_io.run_commands`, cheaper per command than a pipeline).
        self._send = send
        self.max_pending = max_pending
        self._pending: list[AuditRecord] = []
        self._wake = asyncio.Event()
        self._lock = asyncio.Lock()
        self._task: asyncio.Task[None] | None = None
        self._closing = False

    def submit(self, record: AuditRecord) -> None:
        if len(self._pending) >= self.max_pending:  # Redis is gone for long: keep the newest
            del self._pending[: len(self._pending) // 10]
            log.error("audit backlog full: dropped the oldest records")
        self._pending.append(record)
        self._wake.set()

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def flush(self) -> None:
        """Write everything submitted so far."""
        async with self._lock:
            while self._pending:
                # A round trip at most: a backlog (Redis was away) goes out in parts, so the
                # tool calls whose scripts share the connection never wait behind all of it.
                batch = self._pending[:MAX_BATCH]
                del self._pending[:MAX_BATCH]
                try:
                    if self._send is None:
                        await self.audit.append(*batch)
                    else:
                        await self._send(self.audit.commands(batch))
                except Exception:
                    self._pending[:0] = batch  # kept for the next try
                    raise

    async def _run(self) -> None:
        while not self._closing:
            await self._wake.wait()
            if not self._closing:  # let a batch gather: one round trip for many records
                await asyncio.sleep(BATCH_WINDOW_S)
            self._wake.clear()
            try:
                await self.flush()
            except Exception:
                log.exception("audit records could not be written; retrying")
                await asyncio.sleep(0.5)
                self._wake.set()

    async def aclose(self) -> None:
        # A flag, not Task.cancel(): the task may run under a host's cancel scopes (anyio) that
        # would swallow a foreign cancellation and leave this waiting forever.
        self._closing = True
        self._wake.set()
        if self._task is not None:
            await self._task
        with contextlib.suppress(Exception):
            await self.flush()

"""The audit log: one record per request, in a Redis stream every replica appends to.

Who (tenant, agent, on behalf of whom), what (transport, operation, tool), the outcome
(ok, refused before anything ran, or failed while running), the SERF code, the duration and
the call's usage. Capped (approximately) at `MAX_RECORDS`; read newest first.
"""

from __future__ import annotations

import json
from typing import Any, Literal, cast

from pydantic import BaseModel, ConfigDict
from redis.asyncio import Redis

AUDIT_STREAM = "conclave:audit"
MAX_RECORDS = 100_000
Outcome = Literal["ok", "refused", "failed"]


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
    outcome: Outcome
    code: str = ""
    stage: str = ""
    duration_ms: float
    usage: dict[str, Any] | None = None


class AuditLog:
    def __init__(self, redis: Redis) -> None:
        self.redis = redis

    async def append(self, record: AuditRecord) -> None:
        fields = record.model_dump(exclude={"id", "usage"})
        fields["usage"] = json.dumps(record.usage) if record.usage else ""
        await self.redis.xadd(
            AUDIT_STREAM,
            {k: str(v) for k, v in fields.items()},
            maxlen=MAX_RECORDS,
            approximate=True,
        )

    async def query(
        self,
        *,
        tenant: str | None = None,
        agent: str | None = None,
        tool: str | None = None,
        outcome: str | None = None,
        code: str | None = None,
        limit: int = 100,
        scan: int = 10_000,
    ) -> list[AuditRecord]:
        """Newest first: up to `limit` records matching every given filter, among the last
        `scan` records."""
        wanted = {"tenant": tenant, "agent": agent, "tool": tool, "outcome": outcome, "code": code}
        wanted = {k: v for k, v in wanted.items() if v is not None}
        found: list[AuditRecord] = []
        entries = cast(
            list[tuple[str, dict[str, str]]],
            await self.redis.xrevrange(AUDIT_STREAM, count=scan),
        )
        for entry_id, fields in entries:
            if any(fields.get(k) != v for k, v in wanted.items()):
                continue
            usage = json.loads(fields["usage"]) if fields.get("usage") else None
            found.append(AuditRecord.model_validate({**fields, "id": entry_id, "usage": usage}))
            if len(found) >= limit:
                break
        return found

"""`GET /v1/audit` (admins): the audit log, newest first, filtered by who, what, how and when.

With `tenant`, that tenant's own stream is read (`tenant=` with an empty value: the requests
refused before any tenant was known), between `since_ms` and `until_ms` (epoch ms, both
included), however many other records were written meanwhile. Without it, the feed of the
newest records of all tenants (`gateway.telemetry.audit.FEED_RECORDS` at most).
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request

from gateway.http.gateway_parts import gateway_parts
from gateway.http.routes.admin_route import AdminRoute
from gateway.telemetry import AuditLog, AuditRecord, Outcome

router = APIRouter(tags=["audit"], route_class=AdminRoute)


@router.get("/v1/audit")
async def read_audit(
    request: Request,
    tenant: Annotated[str | None, Query(max_length=256)] = None,
    agent: str | None = None,
    tool: str | None = None,
    outcome: Outcome | None = None,
    code: str | None = None,
    since_ms: Annotated[int | None, Query(ge=0)] = None,
    until_ms: Annotated[int | None, Query(ge=0)] = None,
    limit: Annotated[int, Query(gt=0, le=1000)] = 100,
) -> list[AuditRecord]:
    await gateway_parts(request.app).audit.flush()  # this replica's own records, up to now
    audit = AuditLog(gateway_parts(request.app).redis)
    return await audit.query(
        tenant=tenant,
        agent=agent,
        tool=tool,
        outcome=outcome,
        code=code,
        since_ms=since_ms,
        until_ms=until_ms,
        limit=limit,
    )

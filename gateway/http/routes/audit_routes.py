"""`GET /v1/audit` (admins): the audit log, newest first, filtered by who, what and how."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request

from gateway.audit import AuditLog, AuditRecord, Outcome
from gateway.http.routes.admin_route import AdminRoute

router = APIRouter(tags=["audit"], route_class=AdminRoute)


@router.get("/v1/audit")
async def read_audit(
    request: Request,
    tenant: str | None = None,
    agent: str | None = None,
    tool: str | None = None,
    outcome: Outcome | None = None,
    code: str | None = None,
    limit: Annotated[int, Query(gt=0, le=1000)] = 100,
) -> list[AuditRecord]:
    await request.app.state.audit.flush()  # this replica's own records, up to now
    audit = AuditLog(request.app.state.redis)
    return await audit.query(
        tenant=tenant, agent=agent, tool=tool, outcome=outcome, code=code, limit=limit
    )

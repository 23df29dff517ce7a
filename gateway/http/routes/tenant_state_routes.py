"""`GET /v1/tenants/{tenant}/state/{namespace}/{key}` (admins): any tenant's key as its agents
read it (value, version, lease holder), with the admin key instead of an agent's token.

An operator's look, not an agent's read: it is logged in no session's read log (so it never
makes a commit stale) and charged to no tenant's quota. The agents' own read,
`GET /v1/state/{namespace}/{key}`, stays the pipeline's, scoped to the token's tenant.
Refusals: no admin key 403 `ADMIN_REQUIRED`, an unknown namespace 404 `NAMESPACE_NOT_FOUND`,
a malformed name 422 `INVALID_ARGUMENTS`.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Request

from gateway.http.gateway_parts import gateway_parts
from gateway.http.routes.admin_route import AdminRoute
from gateway.state import StateStore
from protocol import NAME_PATTERN, ReadResult

router = APIRouter(prefix="/v1/tenants", tags=["state"], route_class=AdminRoute)


@router.get("/{tenant}/state/{namespace}/{key:path}")
async def read_tenant_key(
    tenant: Annotated[str, Path(pattern=NAME_PATTERN)],
    namespace: str,
    key: str,
    request: Request,
) -> ReadResult:
    store: StateStore = gateway_parts(request.app).state_store
    return await store.peek(tenant, namespace, key)

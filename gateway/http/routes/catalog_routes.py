"""The catalog for admins: every tool the gateway serves, whoever may call it.

`GET /v1/tools` answers what the calling agent may call; an operator (`conclave tools list
--gateway`) asks with the admin key what the gateway serves at all.
"""

from __future__ import annotations

from fastapi import APIRouter, Request

from gateway.http.gateway_parts import gateway_parts
from gateway.http.routes.admin_route import AdminRoute
from protocol import ToolSpec
from tools import ToolRegistry

router = APIRouter(prefix="/v1/catalog", tags=["catalog"], route_class=AdminRoute)


@router.get("/tools")
async def served_tools(request: Request) -> list[ToolSpec]:
    registry: ToolRegistry = gateway_parts(request.app).registry
    return sorted((tool.spec for tool in registry), key=lambda spec: spec.name)

"""Identity administration: register agents (and get their token), list them, revoke them."""

from __future__ import annotations

from fastapi import APIRouter, Request

from gateway.gateway_error import GatewayError
from gateway.http.gateway_parts import gateway_parts
from gateway.http.routes.admin_route import AdminRoute
from gateway.identity import AgentDirectory
from protocol import AgentRecord, AgentRegistration, AgentToken, ErrorCode

# AdminRoute: the admin key is checked before the body is read (a dependency runs after).
router = APIRouter(prefix="/v1/agents", tags=["agents"], route_class=AdminRoute)


def _directory(request: Request) -> AgentDirectory:
    directory: AgentDirectory = gateway_parts(request.app).agents
    return directory


@router.post("", status_code=201)
async def register_agent(registration: AgentRegistration, request: Request) -> AgentToken:
    return await _directory(request).register(registration)


@router.get("")
async def list_agents(request: Request, tenant: str | None = None) -> list[AgentRecord]:
    return await _directory(request).list(tenant)


@router.delete("/{tenant}/{agent}")
async def revoke_agent(tenant: str, agent: str, request: Request) -> AgentRecord:
    record = await _directory(request).revoke(tenant, agent)
    if record is None:
        raise GatewayError.of(
            ErrorCode.NOT_FOUND,
            f"no agent {tenant}/{agent} is registered (any token signed for it is refused"
            " from now on); GET /v1/agents lists them",
        )
    return record

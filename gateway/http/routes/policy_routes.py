"""`/v1/policies` (admins): the policy rules in force. `GET` lists conclave.toml's and the admin
API's; `PUT` replaces the API's, on every replica within a second (`gateway.policy`). A set
with a rule that does not compile is refused 422 `INVALID_ARGUMENTS` naming the rule and the
error's position, and the rules in force stay."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request

from gateway.gateway_error import GatewayError
from gateway.http.gateway_parts import gateway_parts
from gateway.http.routes.admin_route import AdminRoute
from gateway.policy import PolicyError
from protocol import ErrorCode, PolicySet

router = APIRouter(tags=["policies"], route_class=AdminRoute)


@router.get("/v1/policies")
async def read_policies(request: Request) -> dict[str, Any]:
    """The rules in force: conclave.toml's (`file`), the admin API's (`rules`) and their
    version."""
    parts = gateway_parts(request.app)
    rules, version = await parts.policy_store.rules()
    file = [compiled.rule.model_dump() for compiled in parts.policy_store.policies.file]
    return {"file": file, "rules": rules.model_dump()["rules"], "version": version}


@router.put("/v1/policies")
async def replace_policies(request: Request, rules: PolicySet) -> dict[str, Any]:
    """Replace the admin API's rules; conclave.toml's stay."""
    try:
        version = await gateway_parts(request.app).policy_store.replace(rules)
    except PolicyError as exc:
        raise GatewayError.of(
            ErrorCode.INVALID_ARGUMENTS,
            f"the rules were not put in force (the earlier ones stay): {exc}",
            param_hints={"rules": str(exc)},
        ) from exc
    return {"version": version, "rules": len(rules.rules)}

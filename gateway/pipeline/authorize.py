"""Stage 3, authorize: may this principal touch this target?

Tools: the principal's `tool:<glob>` scopes; a tool outside them is refused as
TOOL_NOT_ALLOWED whether or not it exists, so the refusal leaks nothing. A permitted name
the gateway does not serve is TOOL_NOT_FOUND. State: `state:<glob>:read|write` scopes over
the caller's own tenant's namespaces (a scope never reaches another tenant): one it may not
read is NAMESPACE_NOT_FOUND, exactly like a missing one; a write it may only read is
NAMESPACE_FORBIDDEN.
"""

from __future__ import annotations

from gateway.gateway_error import GatewayError
from gateway.pipeline.context import RequestContext
from gateway.state import check_namespace, namespace_not_found
from protocol import ErrorCode, Principal, ToolSpec
from tools import ToolRegistry

_DECISIONS_KEPT = 4096


class AuthorizeStage:
    name = "authorize"

    def __init__(self, registry: ToolRegistry) -> None:
        self.registry = registry
        # (scopes, tool) -> may call: glob matching every scope on every call was a measurable
        # share of the hot path. The answer depends on nothing else, so it can never go stale.
        self._may_call: dict[tuple[tuple[str, ...], str], bool] = {}

    def _allowed(self, scopes: tuple[str, ...], tool: str, principal: Principal) -> bool:
        key = (scopes, tool)
        allowed = self._may_call.get(key)
        if allowed is None:
            allowed = principal.may_call(tool)
            if len(self._may_call) >= _DECISIONS_KEPT:  # bounded: names come from requests
                self._may_call.clear()
            self._may_call[key] = allowed
        return allowed

    async def __call__(self, ctx: RequestContext) -> None:
        principal = ctx.require_principal()
        if ctx.tool_name is not None:
            if not self._allowed(principal.scopes, ctx.tool_name, principal):
                raise GatewayError.of(
                    ErrorCode.TOOL_NOT_ALLOWED,
                    f"agent {principal.tenant}/{principal.agent} may not call {ctx.tool_name!r};"
                    " GET /v1/tools lists what it may call",
                )
            ctx.tool = self.registry.get(ctx.tool_name)
            if ctx.tool is None:
                raise GatewayError.of(
                    ErrorCode.TOOL_NOT_FOUND,
                    f"no tool {ctx.tool_name!r} is served here; GET /v1/tools lists them",
                )
        if ctx.namespace is not None:
            namespace = check_namespace(ctx.namespace)
            if not principal.may_access(namespace, "read"):
                raise namespace_not_found(namespace)  # the same as a missing one: leaks nothing
            if ctx.access == "write" and not principal.may_access(namespace, "write"):
                raise GatewayError.of(
                    ErrorCode.NAMESPACE_FORBIDDEN,
                    f"your token may read but not write state namespace {namespace!r}: ask for"
                    f" scope state:{namespace}:write",
                )


def allowed_specs(registry: ToolRegistry, ctx: RequestContext) -> list[ToolSpec]:
    """The specs of the tools the caller may call: what `tools/list` shows it."""
    principal = ctx.require_principal()
    return [t.spec for t in registry if principal.may_call(t.name)]

"""Stage 3, authorize: may this principal touch this target?

Tools (`find_tool`): a name the gateway does not serve is TOOL_NOT_FOUND, before any scope
is read, with the close matches among the tools the principal may call as suggestions (a
typo gets "did you mean"); a served tool outside the principal's `tool:<glob>` scopes is
TOOL_NOT_ALLOWED. Which names the tenant's gateway serves is not a secret worth a misleading
answer: answering TOOL_NOT_ALLOWED for a typo sent the caller asking for a scope when it
had to fix a name, and the suggestions name only tools it may already call. This stage runs
before admission checks revocation, so a name not served is first checked against the
agent's generation (`is_current`): a revoked token is refused AUTH_REVOKED and never learns
a tool name (issue 26). Served names skip that read; admission refuses them just after.

State: `state:<glob>:read|write` scopes over the caller's own tenant's namespaces (a scope
never reaches another tenant): one it may not read is NAMESPACE_NOT_FOUND, exactly like a
missing one; a write it may only read is NAMESPACE_FORBIDDEN.
"""

from __future__ import annotations

import difflib
from collections.abc import Awaitable, Callable

from gateway.gateway_error import GatewayError
from gateway.identity import token_revoked
from gateway.pipeline.context import RequestContext
from gateway.state import check_namespace, namespace_not_found
from protocol import ErrorCode, Principal, ToolSpec
from tools import RegisteredTool, ToolRegistry

_DECISIONS_KEPT = 4096
_SUGGESTED = 3  # close matches named in a TOOL_NOT_FOUND

IsCurrent = Callable[[Principal], Awaitable[bool]]


class AuthorizeStage:
    name = "authorize"

    def __init__(self, registry: ToolRegistry, is_current: IsCurrent | None = None) -> None:
        self.registry = registry
        self.is_current = is_current  # None: no revocation (in-process tests of this stage)
        # (scopes, tool) -> may call: glob matching every scope on every call was a measurable
        # share of the hot path. The answer depends on nothing else, so it can never go stale.
        self._may_call: dict[tuple[tuple[str, ...], str], bool] = {}

    def _allowed(self, principal: Principal, tool: str) -> bool:
        key = (principal.scopes, tool)
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
            unknown = self.registry.get(ctx.tool_name) is None
            if unknown and self.is_current is not None and not await self.is_current(principal):
                raise token_revoked(principal)  # no suggestions for a revoked token
            ctx.tool = find_tool(self.registry, principal, ctx.tool_name, self._allowed)
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


def find_tool(
    registry: ToolRegistry,
    principal: Principal,
    name: str,
    may_call: Callable[[Principal, str], bool] = Principal.may_call,
) -> RegisteredTool:
    """The served tool `name` if `principal` may call it (`may_call` decides), else
    TOOL_NOT_FOUND (with suggestions) or TOOL_NOT_ALLOWED."""
    tool = registry.get(name)
    if tool is None:
        raise _not_found(registry, principal, name)
    if not may_call(principal, name):
        raise GatewayError.of(
            ErrorCode.TOOL_NOT_ALLOWED,
            f"agent {principal.tenant}/{principal.agent} may not call {name!r}; GET /v1/tools"
            f" lists what it may call, or ask for scope tool:{name}",
        )
    return tool


def _not_found(registry: ToolRegistry, principal: Principal, name: str) -> GatewayError:
    callable_names = [t.name for t in registry if principal.may_call(t.name)]
    suggestions = difflib.get_close_matches(name, callable_names, n=_SUGGESTED)
    guess = f"did you mean {', '.join(repr(s) for s in suggestions)}? " if suggestions else ""
    return GatewayError.of(
        ErrorCode.TOOL_NOT_FOUND,
        f"no tool {name!r} is served here; {guess}GET /v1/tools lists what you may call",
        param_hints={"name": f"no such tool; {guess.rstrip()}"} if suggestions else None,
        details={"suggestions": suggestions},
    )


def allowed_specs(registry: ToolRegistry, ctx: RequestContext) -> list[ToolSpec]:
    """The specs of the tools the caller may call: what `tools/list` shows it."""
    principal = ctx.require_principal()
    return [t.spec for t in registry if principal.may_call(t.name)]

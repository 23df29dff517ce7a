"""Stage 3, authorize: may this principal touch this target?

Tools (`find_tool`): a name the gateway does not serve is TOOL_NOT_FOUND, before any scope
is read, with the close matches among the tools the principal may call as suggestions (a
typo gets "did you mean"); a served tool none of whose names (its served name, its dotted
alias: `tools.sources.tool_names`) the principal's `tool:<glob>` scopes cover is
TOOL_NOT_ALLOWED, so `tool:src.*` and `tool:src__*` both cover source `src`. Which names
the tenant's gateway serves is not a secret worth a misleading
answer: answering TOOL_NOT_ALLOWED for a typo sent the caller asking for a scope when it
had to fix a name, and the suggestions name only tools it may already call. Either refusal
is left on the context for the budget stage to raise: its admission script says first
whether the token was revoked (a revoked token gets AUTH_REVOKED, never suggestions), and
takes a token from the caller's rate limit.

Policies (`gateway.policy`): a tool the scopes allow may still be refused by a `deny` rule whose
condition holds for the call's arguments, caller and time: POLICY_DENIED naming the rule (left
for the budget stage to raise, as every refusal of the target is). A call an `approve` rule's
condition holds for waits here, within its deadline, for a person's decision
(`gateway.approvals.HeldCalls`): approved, it goes on with exactly the arguments approved;
denied or expired, it is refused (APPROVAL_DENIED, APPROVAL_EXPIRED).

A2A agents: a name the gateway does not serve is NOT_FOUND; one already on the request's
delegation chain, or past `A2A_MAX_CHAIN` hops, is DELEGATION_LOOP; one no `agent:<glob>` scope
of the principal covers is AGENT_NOT_ALLOWED (left for the budget stage to raise, as for tools).
An admitted one gets the chain to send on (`a2a_onward`), the caller delegating.

Delegation (`gateway.delegation`): a request carrying `X-Conclave-Chain` is one an agent makes
for the agents before it; a tool, or a namespace, that one of them may not hand on is
POLICY_DENIED though the caller's own scopes allow it (the confused deputy); one done for a
hosted task is stopped when that task ends (`TaskCascade`). A request without the header costs
one header lookup. A task token (the one a hosted agent's worker gets with its task) is bound
to its task's chain: a request made with it acts for that chain, whatever header it carries
or omits. A hosted agent declared `confined` acts only through task tokens: its own token
calls no tool, touches no state and delegates to no agent (POLICY_DENIED), so its code cannot
drop the chain to do more for a caller than the caller may hand on.

State: `state:<glob>:read|write` scopes over the caller's own tenant's namespaces (a scope
never reaches another tenant): one it may not read is NAMESPACE_NOT_FOUND, exactly like a
missing one; a write it may only read is NAMESPACE_FORBIDDEN.
"""

from __future__ import annotations

import difflib
from collections.abc import Awaitable, Callable, Collection, Mapping
from typing import Any

from gateway.approvals import HeldCall, HeldCalls
from gateway.delegation import ChainSigner, DelegationChain, TaskCascade
from gateway.gateway_error import GatewayError
from gateway.pipeline.context import RequestContext
from gateway.policy import Policies
from gateway.state import check_namespace, namespace_not_found
from protocol import A2A_MAX_CHAIN, CHAIN_HEADER, ErrorCode, Principal, ToolSpec
from tools import RegisteredTool, ToolRegistry

_DECISIONS_KEPT = 4096
_SUGGESTED = 3  # close matches named in a TOOL_NOT_FOUND
_CHAIN = CHAIN_HEADER.lower()


def _confined(principal: Principal, confined: frozenset[str]) -> GatewayError | None:
    """POLICY_DENIED for a confined hosted agent's own token (not a task token)."""
    identity = f"{principal.tenant}/{principal.agent}"
    if identity not in confined:
        return None
    return GatewayError.of(
        ErrorCode.POLICY_DENIED,
        f"A2A agent {identity} is confined to its tasks: it acts only with the task token it"
        " gets with each task (WorkItem.task_token; the SDK's client uses it inside a handler),"
        " so what it does for a caller stays within what the caller may hand on",
        details={"policy": "confined", "agent": identity},
    )


# What a caller has used of each quota a call counts against, by quota and limit
QuotaUsage = Callable[[Principal, str], Awaitable[Mapping[str, Any]]]


class AuthorizeStage:
    name = "authorize"

    def __init__(
        self,
        registry: ToolRegistry,
        a2a_agents: Collection[str] = (),
        policies: Policies | None = None,
        chains: ChainSigner | None = None,
        held_calls: HeldCalls | None = None,
        *,
        cascade: TaskCascade | None = None,
        confined: Collection[str] = (),
        quota_usage: QuotaUsage | None = None,
    ) -> None:
        self.registry = registry
        self.a2a_agents = a2a_agents
        self.policies = policies or Policies()
        self.chains = chains or ChainSigner(b"")
        self.cascade = cascade  # where a request done for a hosted task waits for its end
        self.held_calls = held_calls  # None: an `approve` rule refuses (nobody could approve)
        self.quota_usage = quota_usage  # `usage` for rules that read it (gateway.quotas)
        # "tenant/agent" of the hosted agents declared `confined`: they act by task tokens only
        self.confined = frozenset(confined)
        # (scopes, tool) -> may call: glob matching every scope on every call was a measurable
        # share of the hot path. The answer depends on nothing else, so it can never go stale.
        self._may_call: dict[tuple[tuple[str, ...], str], bool] = {}

    def _allowed(self, principal: Principal, tool: RegisteredTool) -> bool:
        key = (principal.scopes, tool.name)
        allowed = self._may_call.get(key)
        if allowed is None:
            allowed = tool.callable_by(principal)
            if len(self._may_call) >= _DECISIONS_KEPT:  # bounded: names come from requests
                self._may_call.clear()
            self._may_call[key] = allowed
        return allowed

    async def __call__(self, ctx: RequestContext) -> None:
        principal = ctx.require_principal()
        header = principal.chain or ctx.headers.get(_CHAIN)  # a task token's chain holds
        if self.confined and not principal.chain:
            refusal = _confined(principal, self.confined)
            if refusal is not None and ctx.namespace is not None:
                raise refusal
            if refusal is not None and (ctx.tool_name is not None or ctx.a2a_agent is not None):
                ctx.tool_refusal = refusal
                return
        if header is not None:
            ctx.chain = self.chains.read(header)
            if ctx.chain.tasks and ctx.cancel is not None and self.cascade is not None:
                self.cascade.watch(ctx.chain, ctx.cancel)  # stopped when the task ends
        chain = ctx.chain
        if ctx.tool_name is not None:
            try:
                ctx.tool = find_tool(self.registry, principal, ctx.tool_name, self._allowed)
            except GatewayError as refused:
                ctx.tool_refusal = refused
            else:
                if chain.by:
                    ctx.tool_refusal = chain.tool_refusal(principal, ctx.tool)
                    if ctx.tool_refusal is not None:
                        ctx.tool = None
                if ctx.tool is not None and self.policies.in_force:
                    await self._decide(ctx, principal, ctx.tool)
        if ctx.a2a_agent is not None:
            ctx.tool_refusal = self._agent_refusal(principal, ctx.a2a_agent, ctx.chain)
            if ctx.tool_refusal is None:
                ctx.a2a_onward = self.chains.onward(ctx.chain, ctx.a2a_agent, principal)
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
            if chain.by:
                denied = chain.namespace_refusal(principal, namespace, ctx.access or "read")
                if denied is not None:
                    raise denied

    async def _decide(
        self, ctx: RequestContext, principal: Principal, tool: RegisteredTool
    ) -> None:
        acting_for, usage = ctx.chain.acting_for, None
        if self.quota_usage is not None and self.policies.reads_usage(
            principal, tool.name, acting_for
        ):
            usage = await self.quota_usage(principal, tool.name)  # one Redis read, then only
        decided = self.policies.decide(principal, tool.name, ctx.arguments, acting_for, usage)
        if isinstance(decided, GatewayError):  # raised by budget too, after revocation and rate
            ctx.tool, ctx.tool_refusal = None, decided
        elif decided is not None:
            if self.held_calls is None:
                raise GatewayError.of(
                    ErrorCode.POLICY_DENIED,
                    f"policy {decided.name!r} asks for approval, which this pipeline cannot hold",
                    details={"policy": decided.name, "reason": decided.reason},
                )
            if ctx.on_held is not None and ctx.on_admitted is not None:
                # An MCP task exists before its call waits: its client polls it meanwhile.
                await ctx.on_admitted(ctx)
                ctx.on_admitted = None
            deadline = ctx.tool_context.deadline_ms if ctx.tool_context is not None else None
            chain = tuple(ctx.chain.acting_for)
            held = HeldCall(
                principal, chain, tool.name, ctx.arguments, deadline, decided, ctx.trace_id,
                ctx.on_held,
            )  # fmt: skip
            ctx.arguments = await self.held_calls.hold(held)

    def _agent_refusal(
        self, principal: Principal, name: str, delegation: DelegationChain
    ) -> GatewayError | None:
        if name not in self.a2a_agents:
            return GatewayError.of(
                ErrorCode.NOT_FOUND,
                f"no A2A agent {name!r} is served here: its card would be at"
                f" /a2a/{name}/.well-known/agent-card.json",
            )
        chain = delegation.agents
        if name in chain or len(chain) >= A2A_MAX_CHAIN:
            why = "is already on it" if name in chain else f"would be hop {len(chain) + 1}"
            return GatewayError.of(
                ErrorCode.DELEGATION_LOOP,
                f"A2A agent {name!r} {why} of the delegation chain {' -> '.join(chain)}"
                f" (at most {A2A_MAX_CHAIN} agents): answer from what you have, or ask a"
                " person",
                details={"chain": list(chain)},
            )
        if not principal.may_delegate(name):
            return GatewayError.of(
                ErrorCode.AGENT_NOT_ALLOWED,
                f"agent {principal.tenant}/{principal.agent} may not call A2A agent {name!r}:"
                f" its registration's agents must name it (scope agent:{name})",
                details={"scope": f"agent:{name}"},
            )
        return None


def find_tool(
    registry: ToolRegistry,
    principal: Principal,
    name: str,
    may_call: Callable[[Principal, RegisteredTool], bool] | None = None,
) -> RegisteredTool:
    """The tool served as `name` (or under that alias) if `principal` may call it (`may_call`
    decides; by default a scope covering any of its names), else TOOL_NOT_FOUND (with
    suggestions) or TOOL_NOT_ALLOWED."""
    tool = registry.get(name)
    if tool is None:
        raise _not_found(registry, principal, name)
    allowed = may_call(principal, tool) if may_call is not None else tool.callable_by(principal)
    if not allowed:
        raise GatewayError.of(
            ErrorCode.TOOL_NOT_ALLOWED,
            f"agent {principal.tenant}/{principal.agent} may not call {name!r}; GET /v1/tools"
            f" lists what it may call, or ask for scope tool:{name}",
            details={"scope": f"tool:{name}"},  # the OAuth challenge's insufficient_scope
        )
    return tool


def _not_found(registry: ToolRegistry, principal: Principal, name: str) -> GatewayError:
    callable_names = [t.name for t in registry if t.callable_by(principal)]
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
    return [t.spec for t in registry if t.callable_by(principal)]

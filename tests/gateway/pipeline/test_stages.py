"""Each pipeline stage on its own, against a real Redis."""

from __future__ import annotations

import time

import anyio
import pytest
from redis.asyncio import Redis

import tools.builtin  # noqa: F401  (registers the built-in tools)
from gateway.budgets import (
    AtbaAllocator,
    CallReads,
    CircuitBreaker,
    LatencyWindow,
    RateLimit,
    WindowRead,
)
from gateway.budgets.admission import Admission
from gateway.config import Settings
from gateway.gateway_error import GatewayError
from gateway.identity.agent_directory import AgentDirectory
from gateway.identity.tokens import issue_token
from gateway.pipeline import (
    AuthenticateStage,
    AuthorizeStage,
    BudgetStage,
    DispatchStage,
    RequestContext,
    ScopeStage,
    fit_limits,
)
from protocol import AgentRegistration, ErrorCode, Principal, ResourceIntent, ResourceRequest
from protocol.time_budget import Budget as BudgetModel
from sandbox.inprocess import InProcessExecutor
from tools.registry import default_registry

pytestmark = pytest.mark.anyio


def _ctx(headers: dict[str, str] | None = None, **kwargs: object) -> RequestContext:
    return RequestContext("http", "test", headers or {}, **kwargs)  # type: ignore[arg-type]


def _principal(*scopes: str) -> Principal:
    return Principal(tenant="acme", agent="w", scopes=scopes, expires_at=0, token_id="jti-1")


async def _refusal(stage: object, ctx: RequestContext) -> ErrorCode:
    with pytest.raises(GatewayError) as info:
        await stage(ctx)  # type: ignore[operator]
    return info.value.error.code


# authenticate -------------------------------------------------------------------------


async def test_authenticate_turns_a_token_into_the_principal(settings: Settings) -> None:
    token = issue_token(settings, tenant="acme", agent="w", scopes=["tool:echo"], obo="alice")
    ctx = _ctx({"authorization": f"Bearer {token}"})
    await AuthenticateStage(settings)(ctx)
    assert ctx.principal is not None
    assert (ctx.principal.tenant, ctx.principal.agent, ctx.principal.obo) == ("acme", "w", "alice")


async def test_authenticate_refuses_missing_bad_and_expired_tokens(settings: Settings) -> None:
    stage = AuthenticateStage(settings)
    assert await _refusal(stage, _ctx()) is ErrorCode.AUTH_REQUIRED
    assert await _refusal(stage, _ctx({"authorization": "Bearer x.y.z"})) is ErrorCode.AUTH_INVALID
    old = issue_token(settings, tenant="acme", agent="w", ttl_s=1, now=time.time() - 60)
    expired = _ctx({"authorization": f"Bearer {old}"})
    assert await _refusal(stage, expired) is ErrorCode.AUTH_EXPIRED
    soon = issue_token(settings, tenant="acme", agent="w", ttl_s=1)  # exp: the next second
    await stage(_ctx({"authorization": f"Bearer {soon}"}))  # valid now, and cached...
    await anyio.sleep(max(0.0, jwt_exp(soon) - time.time() + 0.05))
    cached = _ctx({"authorization": f"Bearer {soon}"})
    assert await _refusal(stage, cached) is ErrorCode.AUTH_EXPIRED  # ...but not past expiry


def jwt_exp(token: str) -> float:
    import jwt

    return float(jwt.decode(token, options={"verify_signature": False})["exp"])


# scope --------------------------------------------------------------------------------


async def test_scope_builds_the_tool_context_from_principal_and_headers() -> None:
    trace = "0af7651916cd43dd8448eb211c80319c"
    headers = {
        "traceparent": f"00-{trace}-b7ad6b7169203331-01",
        "x-conclave-session": "run-42",
        "x-conclave-deadline": "4102444800000",
    }
    ctx = _ctx(headers, principal=_principal("tool:*"))
    await ScopeStage()(ctx)
    assert ctx.tool_context is not None
    assert ctx.tool_context.trace_id == trace
    assert ctx.tool_context.traceparent.startswith(f"00-{trace}-")
    assert not ctx.tool_context.traceparent.endswith("b7ad6b7169203331-01")  # our own span
    assert ctx.tool_context.session_id == "run-42"
    assert ctx.tool_context.deadline_ms == 4102444800000
    assert ctx.tool_context.principal.agent == "w"


async def test_scope_defaults_and_refusals() -> None:
    ctx = _ctx({"traceparent": "garbage"}, principal=_principal())
    await ScopeStage()(ctx)
    assert ctx.tool_context is not None
    assert ctx.tool_context.session_id == "jti-1"  # the token's id
    assert len(ctx.tool_context.trace_id) == 32
    body_deadline = _ctx(principal=_principal(), budget=BudgetModel(deadline_ms=123))
    await ScopeStage()(body_deadline)
    assert body_deadline.tool_context is not None
    assert body_deadline.tool_context.deadline_ms == 123
    bad = _ctx({"x-conclave-deadline": "soon"}, principal=_principal())
    assert await _refusal(ScopeStage(), bad) is ErrorCode.INVALID_REQUEST
    bad_session = _ctx({"x-conclave-session": "a b"}, principal=_principal())
    assert await _refusal(ScopeStage(), bad_session) is ErrorCode.INVALID_ARGUMENTS


# authorize ----------------------------------------------------------------------------


async def _tool_refusal(stage: AuthorizeStage, ctx: RequestContext) -> ErrorCode:
    """What authorize found wrong with the tool named: left for the budget stage to raise
    once admission has said whether the token is current."""
    await stage(ctx)
    assert ctx.tool is None and ctx.tool_refusal is not None
    return ctx.tool_refusal.error.code


async def test_authorize_applies_tool_globs_and_namespaces() -> None:
    stage = AuthorizeStage(default_registry)
    allowed = _ctx(principal=_principal("tool:ec*"), tool_name="echo")
    await stage(allowed)
    assert allowed.tool is not None and allowed.tool.name == "echo"
    denied = _ctx(principal=_principal("tool:ec*"), tool_name="run_shell")
    assert await _tool_refusal(stage, denied) is ErrorCode.TOOL_NOT_ALLOWED
    typo = _ctx(principal=_principal("tool:ec*"), tool_name="no_such")
    # a typo, whatever the scopes
    assert await _tool_refusal(stage, typo) is ErrorCode.TOOL_NOT_FOUND
    unknown = _ctx(principal=_principal("tool:*"), tool_name="no_such")
    assert await _tool_refusal(stage, unknown) is ErrorCode.TOOL_NOT_FOUND
    reader = _principal("state:notes:read")
    await stage(_ctx(principal=reader, namespace="notes", access="read"))
    write = _ctx(principal=reader, namespace="notes", access="write")
    assert await _refusal(stage, write) is ErrorCode.NAMESPACE_FORBIDDEN
    unseen = _ctx(principal=reader, namespace="secrets", access="read")
    assert await _refusal(stage, unseen) is ErrorCode.NAMESPACE_NOT_FOUND  # like a missing one


# budget -------------------------------------------------------------------------------


async def _admitted(stage: BudgetStage, settings: Settings, token: str) -> RequestContext:
    ctx = _ctx({"authorization": f"Bearer {token}"}, tool_name="echo")
    await AuthenticateStage(settings)(ctx)
    await stage(ctx)
    return ctx


async def test_budget_refuses_a_revoked_agent_in_its_admission_round_trip(
    settings: Settings, redis: Redis
) -> None:
    stage = BudgetStage(Admission(redis, rate_per_s=100.0, burst=100))
    directory = AgentDirectory(redis, settings)
    issued = await directory.register(AgentRegistration(tenant="acme", agent="r", tools=["*"]))
    await _admitted(stage, settings, issued.token)
    await directory.revoke("acme", "r")
    with pytest.raises(GatewayError) as info:
        await _admitted(stage, settings, issued.token)
    assert info.value.error.code is ErrorCode.AUTH_REVOKED
    again = await directory.register(AgentRegistration(tenant="acme", agent="r", tools=["*"]))
    await _admitted(stage, settings, again.token)  # re-admitted on purpose


async def test_budget_rate_limits_per_identity_and_tool(redis: Redis) -> None:
    stage = BudgetStage(Admission(redis, rate_per_s=1.0, burst=2))
    for _ in range(2):
        await stage(_ctx(principal=_principal(), tool_name="echo"))
    with pytest.raises(GatewayError) as info:
        await stage(_ctx(principal=_principal(), tool_name="echo"))
    assert info.value.error.code is ErrorCode.RATE_LIMITED
    assert (
        info.value.error.retry_after_ms is not None and 0 < info.value.error.retry_after_ms <= 1000
    )
    await stage(_ctx(principal=_principal(), tool_name="read_file"))  # another bucket


async def test_a_tenant_has_one_rate_however_many_agents_it_registers(redis: Redis) -> None:
    admission = Admission(redis, rate_per_s=100.0, burst=100, tenant=RateLimit(1.0, 3))
    stage = BudgetStage(admission)

    def agent(tenant: str, name: str) -> Principal:
        return Principal(tenant=tenant, agent=name, expires_at=0, token_id="t")

    for name in ("a1", "a2", "a3"):
        await stage(_ctx(principal=agent("acme", name), tool_name="echo"))
    with pytest.raises(GatewayError) as info:  # a fourth agent: the tenant's bucket is empty
        await stage(_ctx(principal=agent("acme", "a4"), tool_name="read_file"))
    assert info.value.error.code is ErrorCode.RATE_LIMITED
    assert "tenant acme" in info.value.error.message
    await stage(_ctx(principal=agent("other", "a1"), tool_name="echo"))  # its own bucket


async def test_one_admission_script_reads_the_breaker_and_the_windows(redis: Redis) -> None:
    window, breaker = LatencyWindow(redis, min_samples=1), CircuitBreaker(redis, failures=1)
    admission = Admission(redis, rate_per_s=100.0, burst=100)
    await window.record("acme", "echo", 40.0)
    await window.record("other", "echo", 900.0)  # another tenant's: never read for acme
    reads = CallReads("echo", 1000, ("echo", "read_file"), window.window_ms)
    decision = await admission.admit("acme", "w", 0, "echo", reads)
    assert decision.allowed and decision.breaker_admitted
    echo = decision.windows["echo"]
    assert echo.version > 0 and echo.members is not None
    assert [window.summarize("echo", echo.members, 2000).p50_ms] == [40.0]
    assert decision.windows["read_file"] == WindowRead(0, [])  # none: version 0, no members
    await breaker.record("acme", "echo", ok=False)  # opens: one failure is the threshold
    stage = BudgetStage(admission, AtbaAllocator(window, breaker, default_registry))
    soon = str(int(time.time() * 1000) + 1000)
    ctx = _ctx({"x-conclave-deadline": soon}, principal=_principal("tool:*"), tool_name="echo")
    await AuthorizeStage(default_registry)(ctx)
    await ScopeStage()(ctx)
    assert await _refusal(stage, ctx) is ErrorCode.UPSTREAM_UNAVAILABLE


async def test_budget_refuses_a_passed_deadline_and_clamps_the_timeout(redis: Redis) -> None:
    stage = BudgetStage(Admission(redis, rate_per_s=100.0, burst=100))
    now_ms = int(time.time() * 1000)
    ctx = _ctx(
        {"x-conclave-deadline": str(now_ms - 5)}, principal=_principal("tool:*"), tool_name="echo"
    )
    await AuthorizeStage(default_registry)(ctx)
    await ScopeStage()(ctx)
    assert await _refusal(stage, ctx) is ErrorCode.DEADLINE_EXCEEDED
    soon = _ctx(
        {"x-conclave-deadline": str(now_ms + 500)}, principal=_principal("tool:*"), tool_name="echo"
    )
    await AuthorizeStage(default_registry)(soon)
    await ScopeStage()(soon)
    await stage(soon)
    assert soon.granted_ms is not None and 0 < soon.granted_ms <= 500  # echo declares 2000


# dispatch -----------------------------------------------------------------------------


def test_fit_limits_lowers_never_raises() -> None:
    intent = ResourceIntent(memory_mb=64, cpu_seconds=1, timeout_ms=2000)
    limits = fit_limits(intent, ResourceRequest(memory_mb=32), granted_ms=500)
    assert (limits.memory_mb, limits.timeout_ms) == (32, 500)
    with pytest.raises(GatewayError) as info:
        fit_limits(intent, ResourceRequest(memory_mb=128), None)
    assert info.value.error.code is ErrorCode.LIMIT_ABOVE_INTENT
    assert "limits.memory_mb" in info.value.error.param_hints


async def _ready(ctx: RequestContext) -> RequestContext:
    await AuthorizeStage(default_registry)(ctx)
    await ScopeStage()(ctx)
    return ctx


async def test_dispatch_validates_before_running_and_passes_the_context() -> None:
    stage = DispatchStage(InProcessExecutor(default_registry))
    ok = await _ready(
        _ctx(principal=_principal("tool:*"), tool_name="echo", arguments={"message": "hi"})
    )
    await stage(ok)
    assert ok.result.value == "hi" and ok.usage is not None and ok.usage.sandbox == "inprocess"
    bad = await _ready(
        _ctx(principal=_principal("tool:*"), tool_name="echo", arguments={"message": 1})
    )
    assert await _refusal(stage, bad) is ErrorCode.INVALID_ARGUMENTS
    assert not bad.executed  # nothing ran

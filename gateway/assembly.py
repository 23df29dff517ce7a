"""The one place the gateway is put together at start-up.

`create_app` checks the configuration and returns the HTTP app whose lifespan builds, in
order: the tool registry, the Redis pool, the executor that runs tools (the sandbox pool on
the configured backend, or the gateway's own threads for `inprocess`), the agent directory,
the audit writer, the table of in-flight calls that cancels reach from any replica, the
egress proxy that sandboxes reach the network through, the tool
sources (python and mcp_stdio run in sandboxes, mcp_http upstreams), the time
budgets (latency windows, breakers, the allocator) and the six-stage pipeline over all of
them. Nothing else constructs these parts.
"""

from __future__ import annotations

import importlib
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
from fastapi import FastAPI
from redis.asyncio import Redis

from gateway.budgets import (
    Admission,
    AtbaAllocator,
    CallFeedback,
    CircuitBreaker,
    HedgeBudget,
    HedgeRace,
    LatencyWindow,
    PlanBounds,
    RateLimit,
)
from gateway.cancellation import InflightCalls
from gateway.config import Settings
from gateway.egress import EgressLimits, EgressProxy
from gateway.http import ConnectionAudit, build_http_app
from gateway.http.mcp import CallerStreams, LogLevels, McpCatalog, ResourceSubscriptions
from gateway.identity import AgentDirectory, JwksVerifier
from gateway.pipeline import (
    AccountStage,
    AuthenticateStage,
    AuthorizeStage,
    BudgetStage,
    DispatchStage,
    HeaderCheck,
    Pipeline,
    ScopeStage,
)
from gateway.redis_io import connect_redis
from gateway.sources import (
    StdioRouter,
    StdioSources,
    UpstreamRouter,
    UpstreamSet,
    open_python_sources,
    register_sources,
)
from gateway.state import StateStore
from gateway.telemetry import (
    AuditLog,
    AuditWriter,
    GatewayMetrics,
    install_json_logging,
    traced_lifespan,
)
from sandbox import InProcessExecutor, ToolExecutor, create_executor
from tools import ToolRegistry, default_registry
from tools.sources import ToolSource, load_config


class ConfigurationError(RuntimeError):
    pass


def create_app(settings: Settings | None = None, sources: Sequence[ToolSource] = ()) -> FastAPI:
    settings = settings or Settings()
    if not settings.redis_url:
        raise ConfigurationError(
            "no Redis configured: set CONCLAVE_REDIS_URL, or start the embedded stack with "
            "'conclave serve'"
        )
    redis_url = settings.redis_url
    if settings.config is not None and not sources:
        sources = load_config(settings.config).source
    config_dir = settings.config.parent if settings.config is not None else Path.cwd()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        install_json_logging(level=settings.log_level.upper())
        state = app.state
        state.redis = connect_redis(redis_url)
        state.audit = AuditWriter(AuditLog(state.redis, settings.audit_stream_max))
        state.audit.start()
        state.connection_audit.attach(state.audit)  # the connection layer's refusals too
        state.inflight = InflightCalls(state.redis)  # notifications/cancelled finds calls here
        state.log_levels = LogLevels(state.redis)  # each caller's logging/setLevel
        state.egress = EgressProxy(state.audit, _egress_limits(settings))
        python = await open_python_sources(sources, config_dir, settings)  # in a sandbox
        register_sources(state.registry, python.reports)
        state.stdio = StdioSources(sources, state.registry)  # mcp_stdio sources
        sandbox_settings = await state.stdio.open(python.sandbox_settings)
        state.executor = await _tool_executor(sandbox_settings, state.registry, state.egress)
        state.agents = AgentDirectory(state.redis, settings)
        state.state_store = StateStore.from_settings(state.redis, settings)
        state.latency_window = _latency_window(settings, state.redis)
        state.breaker = _circuit_breaker(settings, state.redis)
        state.upstreams = UpstreamSet(sources, state.registry)  # mcp_http sources
        # /mcp's GET streams, fed from any replica, and the subscriptions the upstreams'
        # news goes to
        state.caller_streams = CallerStreams(state.redis, state.upstreams.sees)
        subscriptions = ResourceSubscriptions(state.redis, state.caller_streams, state.upstreams)
        state.upstreams.events = subscriptions
        state.mcp_catalog = McpCatalog(state.upstreams, state.stdio, subscriptions)
        state.pipeline, state.header_check = _pipeline(settings, state.redis, state.registry, app)
        try:
            async with anyio.create_task_group() as background:
                await background.start(state.upstreams.run)  # each upstream tried once
                await background.start(state.inflight.listen)  # cancels from any replica
                await background.start(state.caller_streams.listen)  # news from any replica
                yield
                background.cancel_scope.cancel()
        finally:
            state.stdio.close()
            await state.executor.aclose()
            await state.egress.aclose()
            state.connection_audit.attach(None)
            await state.audit.aclose()
            await state.redis.aclose()

    app = build_http_app(traced_lifespan(lifespan))  # traces while it runs if OTEL_* ask
    app.state.settings = settings
    app.state.sandbox_name = settings.sandbox.backend
    app.state.registry = served_tools(settings.tool_modules)
    app.state.metrics = GatewayMetrics(app.state.registry)
    app.state.connection_audit = ConnectionAudit()  # the server's protocol writes through it
    return app


def served_tools(modules: Sequence[str]) -> ToolRegistry:
    """A registry of this gateway's own holding the tools of `modules` (the sources' join it
    at start-up). Importing a module files its @tool functions in the process's default
    registry, which holds whatever else the process imported too: a gateway serves only what
    it is configured with, however many gateways or tool modules a process has."""
    for module in modules:
        importlib.import_module(module)
    registry = ToolRegistry()
    for tool in default_registry:
        if tool.entrypoint.partition(":")[0] in modules:
            registry.add(tool)
    return registry


async def _tool_executor(
    settings: Settings, registry: ToolRegistry, egress: EgressProxy
) -> ToolExecutor:
    if settings.sandbox.backend == "inprocess":  # no isolation: measures the gateway alone
        return InProcessExecutor(registry)
    # The sandbox's runner imports the same tool modules. A sandbox a kill tore down is
    # replaced at once: ATBA's kills invite retries, which should find it warm.
    # Each sandbox's egress socket is served by the gateway's egress proxy.
    # Opened here, in the lifespan's task, which closes it: its task group reaps idle sandboxes.
    pool = create_executor(
        settings.sandbox,
        settings.engine_hosts,
        settings.tool_modules,
        replace_killed=True,
        egress=egress,
    )
    return await pool.open()


def _egress_limits(settings: Settings) -> EgressLimits:
    return EgressLimits(
        per_sandbox=settings.egress_connections_per_sandbox,
        pending_heads=settings.egress_pending_heads_per_sandbox,
        head_timeout_s=settings.egress_head_timeout_s,
        total=settings.egress_connections_total,
    )


def _latency_window(settings: Settings, redis: Redis) -> LatencyWindow:
    return LatencyWindow(
        redis,
        window_s=settings.latency_window_s,
        max_samples=settings.latency_window_max,
        min_samples=settings.latency_min_samples,
    )


def _hedge_budget(settings: Settings, redis: Redis) -> HedgeBudget | None:
    """Each identity's share of hedges (None: hedging is off)."""
    if settings.hedge_share <= 0:
        return None
    return HedgeBudget(redis, share=settings.hedge_share, cap=settings.hedge_cap)


def _circuit_breaker(settings: Settings, redis: Redis) -> CircuitBreaker:
    return CircuitBreaker(
        redis, failures=settings.breaker_failures, cooldown_ms=settings.breaker_cooldown_ms
    )


def _pipeline(
    settings: Settings, redis: Redis, registry: ToolRegistry, app: FastAPI
) -> tuple[Pipeline, HeaderCheck]:
    """The six stages in DESIGN.md's order, account running whatever happened; and what
    authenticate and budget decide from a request's headers before its body is read."""
    state = app.state
    jwks = JwksVerifier(settings) if settings.jwks_url else None
    admission = Admission(
        redis,
        settings.rate_limit_per_s,
        settings.rate_limit_burst,
        RateLimit(settings.tenant_rate_limit_per_s, settings.tenant_rate_limit_burst),
        in_flight_max=settings.tenant_in_flight_max,
    )
    hedges = _hedge_budget(settings, redis)
    allocator = AtbaAllocator(
        state.latency_window,
        state.breaker,
        registry,
        margin_ms=settings.budget_margin_ms,
        min_grant_ms=settings.budget_min_grant_ms,
        plan_bounds=PlanBounds(settings.budget_plan_max, settings.budget_plan_name_max),
        hedges=hedges,
        hedge_quantile=settings.hedge_quantile,
    )
    executor = UpstreamRouter(StdioRouter(state.executor, state.stdio), state.upstreams)
    hedging = HedgeRace(executor, hedges, state.latency_window) if hedges else None
    authenticate = AuthenticateStage(settings, jwks)
    budget = BudgetStage(admission, allocator)
    pipeline = Pipeline(
        stages=[
            authenticate,
            ScopeStage(),
            AuthorizeStage(registry),
            budget,
            DispatchStage(
                executor,
                reply_margin_ms=settings.budget_margin_ms,
                inflight=state.inflight,
                hedging=hedging,
            ),
        ],
        closing=[
            AccountStage(
                state.audit,
                state.metrics,
                CallFeedback(state.latency_window, state.breaker, hedges),
                admission,
            )
        ],
    )
    return pipeline, HeaderCheck(authenticate, budget)

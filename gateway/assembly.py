"""The one place the gateway is put together at start-up.

`create_app` checks the configuration and returns the HTTP app whose lifespan builds, in
order: the tool registry, the Redis pool, the executor that runs tools (the sandbox pool on
the configured backend, or the gateway's own threads for `inprocess`), the agent directory,
the audit writer, the table of in-flight calls that cancels reach from any replica, the
egress proxy that sandboxes reach the network through, the tool
sources (python and mcp_stdio run in sandboxes, mcp_http upstreams), the time
budgets (latency windows, breakers, the allocator) and the six-stage pipeline over all of
them, kept on the app as one frozen `GatewayParts` (`gateway.http.gateway_parts`), which
handlers read through `gateway_parts(app)`. Nothing else constructs these parts.
"""

from __future__ import annotations

import importlib
import os
import secrets
import socket
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path

import anyio
from fastapi import FastAPI
from redis.asyncio import Redis

from gateway.a2a import (
    A2aForwarder,
    CardSigner,
    HostedA2a,
    HostedAgents,
    HostedTasks,
    LiveTasks,
    RemoteAgents,
    TaskOwners,
)
from gateway.approvals import ApprovalBook, ApprovalWebhook, HeldCalls, WebhookRefused
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
from gateway.config import Settings, keep_settings
from gateway.delegation import ChainSigner, TaskCascade
from gateway.egress import EgressLimits, EgressProxy
from gateway.http import ConnectionAudit, GatewayParts, build_http_app, keep_parts
from gateway.http.mcp import task_outcome_of
from gateway.identity import AgentDirectory, JwksVerifier
from gateway.mcp_state import (
    CallerStreams,
    ClientRequests,
    InputRounds,
    LogLevels,
    McpCatalog,
    ResourceSubscriptions,
)
from gateway.mcp_tasks import TaskRunner, TaskStore
from gateway.pipeline import (
    AccountStage,
    AuthenticateStage,
    AuthorizeStage,
    BodyRate,
    BudgetStage,
    DispatchStage,
    HeaderCheck,
    Pipeline,
    ScopeStage,
)
from gateway.policy import Policies, PolicyError, PolicyStore, compile_rules
from gateway.quotas import QuotaBook, QuotaCharge, Quotas, QuotaStage
from gateway.redis_io import connect_redis, run_commands
from gateway.sources import (
    SourceRouter,
    StdioSources,
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
from protocol import PolicyRule, QuotaRule
from sandbox import InProcessExecutor, create_executor
from tools import ToolRegistry, default_registry
from tools.calls import ToolExecutor
from tools.sources import ToolSource, load_config


class ConfigurationError(RuntimeError):
    pass


def _task_store(settings: Settings, redis: Redis) -> TaskStore:
    # A lease names this process (and this start of it: a pid can be reused).
    replica = f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"
    return TaskStore(
        redis,
        replica=replica,
        ttl_ms=settings.task_ttl_s * 1000,
        poll_ms=settings.task_poll_interval_ms,
        lease_ms=settings.task_lease_ms,
        quota_bytes=settings.state_quota_bytes,
    )


def create_app(
    settings: Settings | None = None,
    sources: Sequence[ToolSource] = (),
    *,
    connection_audit: ConnectionAudit | None = None,
) -> FastAPI:
    """The gateway's app for `settings`; `connection_audit` is the one the server's protocol
    writes its refusals through, when the server is built before the app (a new one if not)."""
    settings = settings or Settings()
    if not settings.redis_url:
        raise ConfigurationError(
            "no Redis configured: set CONCLAVE_REDIS_URL, or start the embedded stack with "
            "'conclave serve'"
        )
    redis_url = settings.redis_url
    config = load_config(settings.config) if settings.config is not None else None
    if config is not None and not sources:
        sources = config.source
    a2a_agents = RemoteAgents(config.a2a_agent if config is not None else ())
    policies = _policies(config.policy if config is not None else ())
    quotas = _quotas(config.quota if config is not None else ())
    webhook = _approval_webhook(settings)
    hosted_agents = HostedAgents(config.a2a_agent if config is not None else ())
    config_dir = settings.config.parent if settings.config is not None else Path.cwd()

    registry = served_tools(settings.tool_modules)
    metrics = GatewayMetrics(registry)
    connection_audit = connection_audit or ConnectionAudit()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        install_json_logging(level=settings.log_level.upper())
        redis = connect_redis(redis_url)
        audit = AuditWriter(
            AuditLog(redis, settings.audit_stream_max),
            send=partial(run_commands, redis),  # no frame of this module per call
        )
        audit.start()
        connection_audit.attach(audit)  # the connection layer's refusals too
        inflight = InflightCalls(redis)  # notifications/cancelled finds calls here
        log_levels = LogLevels(redis)  # each caller's logging/setLevel
        egress = EgressProxy(audit, _egress_limits(settings))
        python = await open_python_sources(sources, config_dir, settings)  # in a sandbox
        register_sources(registry, python.reports)
        stdio = StdioSources(sources, registry)  # mcp_stdio sources
        sandbox_settings = await stdio.open(python.sandbox_settings)
        executor = await _tool_executor(sandbox_settings, registry, egress)
        agents = AgentDirectory(redis, settings)
        state_store = StateStore.from_settings(redis, settings)
        latency_window = _latency_window(settings, redis)
        breaker = _circuit_breaker(settings, redis)
        upstreams = UpstreamSet(sources, registry)  # mcp_http sources
        # /mcp's GET streams, fed from any replica, and the subscriptions the upstreams'
        # news goes to
        caller_streams = CallerStreams(
            redis,
            lambda principal, source: (
                stdio.sees(principal, source) or upstreams.sees(principal, source)
            ),
        )
        # Requests a call's servers send its client, answered through any replica
        secret = settings.secret.get_secret_value().encode()
        client_requests = ClientRequests(redis, secret)
        # ... and, for a 2026-07-28 client, in rounds (InputRequiredResult, then its retry)
        input_rounds = InputRounds(redis, client_requests, secret)
        subscriptions = ResourceSubscriptions(redis, caller_streams, upstreams, stdio)
        upstreams.events = subscriptions
        mcp_catalog = McpCatalog(upstreams, stdio, subscriptions)
        if webhook is not None:
            await _checked(webhook)
        approvals = ApprovalBook(redis, audit, webhook)  # held calls, any replica decides
        held_calls = HeldCalls(approvals)  # ... those this replica holds
        quota_book = QuotaBook(redis, quotas)  # conclave.toml's quotas, counted in Redis
        chains = ChainSigner(secret)  # X-Conclave-Chain, read and written
        cascade = TaskCascade(redis)  # a delegated task's end stops what runs under it
        hosted_tasks = HostedTasks(redis, settings.a2a_task_ttl_s)  # hosted agents' tasks
        forwarder = A2aForwarder(  # remote agents' requests; their tasks bound to callers
            TaskOwners(redis, settings.a2a_task_ttl_s), settings.a2a_max_answer_bytes, hosted_tasks
        )
        pipeline, header_check = _pipeline(
            settings,
            redis,
            registry,
            executor=SourceRouter(executor, stdio, upstreams),
            inflight=inflight,
            audit=audit,
            metrics=metrics,
            latency_window=latency_window,
            breaker=breaker,
            a2a_names=a2a_agents.names | hosted_agents.names,
            policies=policies,
            held_calls=held_calls,
            quota_book=quota_book,
            chains=chains,
            cascade=cascade,
            confined=hosted_agents.confined,
        )
        policy_store = PolicyStore(redis, policies)  # the admin API's rules
        tasks = TaskRunner(_task_store(settings, redis), pipeline, task_outcome_of)  # MCP tasks
        parts = GatewayParts(
            sandbox_name=settings.sandbox.backend,
            registry=registry,
            metrics=metrics,
            connection_audit=connection_audit,
            redis=redis,
            audit=audit,
            inflight=inflight,
            log_levels=log_levels,
            egress=egress,
            stdio=stdio,
            executor=executor,
            agents=agents,
            state_store=state_store,
            latency_window=latency_window,
            breaker=breaker,
            upstreams=upstreams,
            caller_streams=caller_streams,
            mcp_catalog=mcp_catalog,
            pipeline=pipeline,
            header_check=header_check,
            client_requests=client_requests,
            input_rounds=input_rounds,
            tasks=tasks,
            policy_store=policy_store,
            approvals=approvals,
            quotas=quota_book,
            a2a_agents=a2a_agents,
            a2a=forwarder,
            hosted_agents=hosted_agents,
            hosted=HostedA2a(
                hosted_tasks,
                hosted_agents,
                chains,
                cascade,
                LiveTasks(redis, settings.a2a_tenant_tasks_max, settings.a2a_task_ttl_s),
                a2a_agents,
                forwarder,
            ),
            card_signer=CardSigner(settings.a2a_card_key) if settings.a2a_card_key else None,
        )
        keep_parts(app, parts)
        try:
            # Left last: the closing stages of calls answered late run before Redis closes.
            async with pipeline.closing_late(), anyio.create_task_group() as background:
                await background.start(upstreams.run)  # each upstream tried once
                await background.start(inflight.listen)  # cancels from any replica
                await background.start(caller_streams.listen)  # news from any replica
                await background.start(subscriptions.run)  # stdio servers' news, renewals
                await background.start(tasks.run)  # MCP tasks' calls run in its group
                await background.start(client_requests.listen)  # clients' answers
                await background.start(input_rounds.run)  # calls between rounds
                await background.start(parts.hosted.run)  # hosted A2A tasks' leases, deadlines
                await background.start(policy_store.follow)  # the admin API's policy rules
                await background.start(held_calls.listen)  # approvals decided on any replica
                if webhook is not None:
                    await background.start(webhook.run)  # held calls told to the operator
                await background.start(cascade.listen)  # delegated tasks ended on any replica
                yield
                background.cancel_scope.cancel()
        finally:
            stdio.close()
            await executor.aclose()
            await a2a_agents.aclose()
            await egress.aclose()
            connection_audit.attach(None)
            await audit.aclose()
            await redis.aclose()

    app = build_http_app(traced_lifespan(lifespan))  # traces while it runs if OTEL_* ask
    keep_settings(app, settings)
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


def _policies(rules: Sequence[PolicyRule]) -> Policies:
    """conclave.toml's rules, compiled; one that does not compile stops the start-up."""
    try:
        return Policies(compile_rules(rules))
    except PolicyError as exc:
        raise ConfigurationError(f"conclave.toml: [[policy]] {exc}") from exc


def _approval_webhook(settings: Settings) -> ApprovalWebhook | None:
    if not settings.approval_webhook_url:
        return None
    secret = settings.approval_webhook_secret.get_secret_value().encode()
    private = settings.approval_webhook_private
    try:
        return ApprovalWebhook(settings.approval_webhook_url, secret, private=private)
    except WebhookRefused as exc:
        raise ConfigurationError(str(exc)) from exc


async def _checked(webhook: ApprovalWebhook) -> None:
    try:
        await webhook.check()
    except WebhookRefused as exc:
        raise ConfigurationError(str(exc)) from exc


def _quotas(rules: Sequence[QuotaRule]) -> Quotas:
    try:
        return Quotas(rules)
    except ValueError as exc:
        raise ConfigurationError(f"conclave.toml: [[quota]] {exc}") from exc


def _quota_stages(book: QuotaBook) -> list[QuotaStage]:
    return [QuotaStage(book)] if book.quotas.rules else []


def _quota_charges(book: QuotaBook) -> list[QuotaCharge]:
    budgets = any(rule.cpu_s_per_day is not None for rule in book.quotas.rules)
    return [QuotaCharge(book)] if budgets else []


def _circuit_breaker(settings: Settings, redis: Redis) -> CircuitBreaker:
    return CircuitBreaker(
        redis, failures=settings.breaker_failures, cooldown_ms=settings.breaker_cooldown_ms
    )


def _pipeline(
    settings: Settings,
    redis: Redis,
    registry: ToolRegistry,
    *,
    executor: ToolExecutor,
    inflight: InflightCalls,
    audit: AuditWriter,
    metrics: GatewayMetrics,
    latency_window: LatencyWindow,
    breaker: CircuitBreaker,
    a2a_names: frozenset[str],
    policies: Policies,
    held_calls: HeldCalls,
    quota_book: QuotaBook,
    chains: ChainSigner,
    cascade: TaskCascade,
    confined: frozenset[str],
) -> tuple[Pipeline, HeaderCheck]:
    """The six stages in docs/architecture.md's order, account running whatever happened; and what
    authenticate and budget decide from a request's headers before its body is read.
    `executor` runs every tool, wherever it is served from."""
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
        latency_window,
        breaker,
        registry,
        margin_ms=settings.budget_margin_ms,
        min_grant_ms=settings.budget_min_grant_ms,
        hedges=hedges,
        hedge_quantile=settings.hedge_quantile,
    )
    hedging = HedgeRace(executor, hedges, latency_window) if hedges else None
    authenticate = AuthenticateStage(settings, jwks)
    budget = BudgetStage(admission, allocator)
    pipeline = Pipeline(
        stages=[
            authenticate,
            ScopeStage(PlanBounds(settings.budget_plan_max, settings.budget_plan_name_max)),
            AuthorizeStage(
                registry,
                a2a_names,
                policies,
                chains,
                held_calls,
                cascade=cascade,
                confined=confined,
                quota_usage=quota_book.usage,  # for rules that read `usage`
            ),
            budget,
            *_quota_stages(quota_book),  # none without [[quota]]: nothing per call
            DispatchStage(
                executor,
                reply_margin_ms=settings.budget_margin_ms,
                inflight=inflight,
                hedging=hedging,
            ),
        ],
        closing=[
            AccountStage(
                audit,
                metrics,
                CallFeedback(latency_window, breaker, hedges),
                admission,
            ),
            *_quota_charges(quota_book),  # CPU budgets charged after the call ran
        ],
    )
    body_rate = BodyRate(settings.tenant_body_bytes_per_s, settings.tenant_body_bytes_burst)
    return pipeline, HeaderCheck(authenticate, budget, body_rate)

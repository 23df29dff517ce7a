"""The one place the six stages are put together, in DESIGN.md's order."""

from __future__ import annotations

from redis.asyncio import Redis

from gateway.admission import Admission
from gateway.audit import AuditWriter
from gateway.budgets.compose import build_time_budgets
from gateway.jwks import JwksVerifier
from gateway.metrics import GatewayMetrics
from gateway.pipeline.account import Account
from gateway.pipeline.authenticate import Authenticate
from gateway.pipeline.authorize import Authorize
from gateway.pipeline.budget import Budget
from gateway.pipeline.dispatch import Dispatch
from gateway.pipeline.pipeline import Pipeline
from gateway.pipeline.scope import Scope
from gateway.settings import Settings
from sandbox.executor import ToolExecutor
from tools.registry import ToolRegistry


def build_pipeline(
    settings: Settings,
    redis: Redis,
    registry: ToolRegistry,
    executor: ToolExecutor,
    metrics: GatewayMetrics,
    audit: AuditWriter,
) -> Pipeline:
    jwks = JwksVerifier(settings.jwks_url) if settings.jwks_url else None
    admission = Admission(redis, settings.rate_limit_per_s, settings.rate_limit_burst)
    budgets = build_time_budgets(settings, redis, registry, executor)  # ATBA + breaker
    return Pipeline(
        stages=[
            Authenticate(settings, jwks),
            Scope(),
            Authorize(registry),
            Budget(admission, budgets.allocator),
            Dispatch(budgets.executor),
        ],
        closing=[Account(audit, metrics)],
    )

"""`GET /v1/tools/{name}/latency`: a tool's p50/p95 as the allocator sees them for the
caller's tenant, and the tenant's breaker of it.

Runs through the pipeline (authenticated, accounted) as an operation; the caller sees only
tools it may call, with the same TOOL_NOT_FOUND / TOOL_NOT_ALLOWED answers as a call.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request

from gateway.budgets import CircuitBreaker, LatencyWindow
from gateway.config import Settings, app_settings
from gateway.http.gateway_parts import gateway_parts
from gateway.http.responses import refusal
from gateway.pipeline import Pipeline, RequestContext, find_tool
from protocol import ToolLatency
from tools import ToolRegistry

router = APIRouter(prefix="/v1/tools", tags=["tools"])


@router.get("/{name}/latency", response_model=ToolLatency)
async def tool_latency(name: str, request: Request) -> Any:
    settings: Settings = app_settings(request.app)
    registry: ToolRegistry = gateway_parts(request.app).registry

    async def report(ctx: RequestContext) -> ToolLatency:
        principal = ctx.require_principal()
        registered = find_tool(registry, principal, name)
        window: LatencyWindow = gateway_parts(request.app).latency_window
        estimate = await window.estimate(principal.tenant, name, registered.spec.intent.timeout_ms)
        breaker_of: CircuitBreaker = gateway_parts(request.app).breaker
        breaker = await breaker_of.state(principal.tenant, name)
        return ToolLatency(
            tool=name,
            p50_ms=estimate.p50_ms,
            p95_ms=estimate.p95_ms,
            samples=estimate.samples,
            censored=estimate.censored,
            source=estimate.source,
            window_s=settings.latency_window_s,
            breaker=breaker.state,
        )

    ctx = RequestContext("http", "tools:latency", request.headers, action=report)
    pipeline: Pipeline = gateway_parts(request.app).pipeline
    await pipeline.run(ctx)
    if ctx.error is not None:
        return refusal(ctx.error)
    return ctx.result

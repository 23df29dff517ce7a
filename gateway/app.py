"""The gateway's FastAPI application: settings, the Redis pool, error handlers and routes."""

from __future__ import annotations

import importlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
from fastapi import FastAPI
from starlette.types import Receive, Scope, Send

from gateway import mcp
from gateway.agent_directory import AgentDirectory
from gateway.audit import AuditLog, AuditWriter
from gateway.errors import install_error_handlers
from gateway.executors import create_executor, create_reaper
from gateway.fast_path import hot_handler, serve_hot
from gateway.json_logs import install_json_logging
from gateway.metrics import GatewayMetrics
from gateway.pipeline import build_pipeline
from gateway.redis_client import connect_redis
from gateway.routes import agents, audit, health, latency, metrics, tools
from gateway.routes import state as state_routes
from gateway.settings import Settings
from tools.registry import default_registry


class ConfigurationError(RuntimeError):
    pass


class GatewayApp(FastAPI):
    """FastAPI with the hot routes (tool calls, /mcp) served ahead of its middleware stack."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        handler = None if self.root_path else hot_handler(scope)
        if handler is None:
            await super().__call__(scope, receive, send)
            return
        scope["app"] = self  # what Starlette sets: handlers reach app.state through it
        await serve_hot(handler, scope, receive, send)


def create_app(settings: Settings | None = None) -> FastAPI:
    settings = settings or Settings()
    if not settings.redis_url:
        raise ConfigurationError(
            "no Redis configured: set CONCLAVE_REDIS_URL, or start the embedded stack with "
            "'conclave serve'"
        )
    redis_url = settings.redis_url

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        install_json_logging(level=settings.log_level.upper())
        for module in settings.tool_modules:  # their @tool functions land in the registry
            importlib.import_module(module)
        app.state.registry = default_registry
        app.state.redis = connect_redis(redis_url)
        app.state.executor = create_executor(settings, app.state.registry)
        app.state.agents = AgentDirectory(app.state.redis, settings)
        app.state.audit = AuditWriter(AuditLog(app.state.redis))
        app.state.audit.start()
        app.state.pipeline = build_pipeline(
            settings,
            app.state.redis,
            app.state.registry,
            app.state.executor,
            app.state.metrics,
            app.state.audit,
        )
        try:
            async with anyio.create_task_group() as background:
                if (reaper := create_reaper(app.state.executor)) is not None:
                    background.start_soon(reaper)
                yield
                background.cancel_scope.cancel()
        finally:
            await app.state.audit.aclose()
            await app.state.executor.aclose()
            await app.state.redis.aclose()

    app = GatewayApp(title="Conclave gateway", version="0.1.0", lifespan=lifespan)
    app.state.settings = settings
    app.state.sandbox_name = settings.sandbox_backend
    app.state.metrics = GatewayMetrics()
    install_error_handlers(app)
    # Hot routes first: routes are matched in order.
    app.include_router(tools.router)
    app.include_router(mcp.router)
    app.include_router(latency.router)
    app.include_router(health.router)
    app.include_router(state_routes.router)
    app.include_router(agents.router)
    app.include_router(audit.router)
    app.include_router(metrics.router)
    return app

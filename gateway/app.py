"""The gateway's FastAPI application: settings, the Redis pool, error handlers and routes."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI

from gateway.errors import install_error_handlers
from gateway.redis_client import connect_redis
from gateway.routes import health
from gateway.routes import state as state_routes
from gateway.settings import Settings


class ConfigurationError(RuntimeError):
    pass


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
        app.state.redis = connect_redis(redis_url)
        try:
            yield
        finally:
            await app.state.redis.aclose()

    app = FastAPI(title="Conclave gateway", version="0.1.0", lifespan=lifespan)
    app.state.settings = settings
    app.state.sandbox_name = settings.sandbox_backend
    install_error_handlers(app)
    app.include_router(health.router)
    app.include_router(state_routes.router)
    return app

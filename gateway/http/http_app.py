"""The gateway's HTTP application: FastAPI with the hot routes served ahead of its middleware.

`build_http_app` includes every router, in `gateway.http.routes.ROUTERS`'s order, and the
error handlers. A hot route is declared with `@hot_route` where it is declared; the fast path
is built from the app's route table on its first call. What the routes reach through
`gateway_parts(app)` (the pipeline, the registry, Redis) is built by the lifespan that
`gateway.assembly` passes in; the settings (`app_settings(app)`) are there before it runs.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

from fastapi import FastAPI
from starlette.types import Receive, Send
from starlette.types import Scope as AsgiScope

from gateway.config import app_settings
from gateway.http.body import as_json_body
from gateway.http.connections import HostCheck, StrangerPacing
from gateway.http.console import ConsoleHeaders
from gateway.http.console import router as console_router
from gateway.http.fast_path import FastPath, serve_hot
from gateway.http.openapi_document import complete_document
from gateway.http.responses import install_error_handlers, with_resource_metadata
from gateway.http.routes import ROUTERS
from gateway.telemetry import TRACING, serve_traced

Lifespan = Callable[[FastAPI], AbstractAsyncContextManager[None]]


class GatewayApp(FastAPI):
    """FastAPI with the hot routes (tool calls, /mcp) served ahead of its middleware stack."""

    _fast_path: FastPath | None = None
    _host_check: HostCheck | None = None
    _stranger_pacing: StrangerPacing | None = None

    async def __call__(self, scope: AsgiScope, receive: Receive, send: Send) -> None:
        if TRACING.on and scope["type"] == "http":  # one span per request (telemetry.tracing)
            await serve_traced(self._serve, scope, receive, send)
            return
        await self._serve(scope, receive, send)

    @property
    def host_check(self) -> HostCheck | None:
        """The gateway's Host (and Origin) allow-list, once its settings are known."""
        if self._host_check is None and hasattr(self.state, "settings"):
            settings = app_settings(self)
            self._host_check = HostCheck(settings.allowed_hosts, settings.host)
        return self._host_check

    @property
    def stranger_pacing(self) -> StrangerPacing | None:
        """The pace of 401 answers per client address, once the app's settings are known."""
        if self._stranger_pacing is None and hasattr(self.state, "settings"):
            self._stranger_pacing = StrangerPacing(self.state.settings.http_unauthenticated_per_s)
        return self._stranger_pacing

    async def _serve(self, scope: AsgiScope, receive: Receive, send: Send) -> None:
        # The DNS-rebinding guard, ahead of everything, once the app's settings are known.
        check = self.host_check
        if check is not None and scope["type"] == "http" and not check.allows(scope):
            await check.refuse(scope, receive, send)
            return
        if scope["type"] == "http":  # every Bearer challenge names our OAuth metadata
            send = with_resource_metadata(scope, send)
            if (pacing := self.stranger_pacing) is not None:  # a stranger's 401s, paced
                send = pacing.pace(scope, send)
        # Built once, on the first call, as Starlette builds its middleware stack: every route
        # is declared by then, wherever it was declared from.
        if self._fast_path is None:
            self._fast_path = FastPath(self.router.routes)
        handler = None if self.root_path else self._fast_path.handler(scope)
        if handler is None:
            if scope["type"] == "http":
                as_json_body(scope)
            await super().__call__(scope, receive, send)
            return
        scope["app"] = self  # what Starlette sets: handlers reach the app's parts through it
        await serve_hot(handler, scope, receive, send)

    def openapi(self) -> dict[str, Any]:
        """FastAPI's document, plus the routes it does not document (the hot ones, plain
        endpoints) and every operation's SERF refusals."""
        if self.openapi_schema is None:
            complete_document(super().openapi(), self.router.routes)
        return self.openapi_schema  # type: ignore[return-value]


def build_http_app(lifespan: Lifespan) -> GatewayApp:
    # /docs is our own route (routes/api_docs_routes.py: Swagger UI served offline); no ReDoc.
    app = GatewayApp(
        title="Conclave gateway", version="0.1.0", lifespan=lifespan, docs_url=None, redoc_url=None
    )
    install_error_handlers(app)
    for router in ROUTERS:
        app.include_router(router)
    app.include_router(console_router)  # /console: the live console (admins)
    app.add_middleware(ConsoleHeaders)  # CSP, nosniff, no framing on every console answer
    return app


__all__ = ["GatewayApp", "build_http_app"]

"""Admin-only routes, refused before any of the request's body is read.

FastAPI reads and parses a route's body before it solves the route's dependencies, so an
admin check declared as a dependency ran after an anonymous caller's upload had been read in
full (80 MB read, then refused). `AdminRoute` checks the admin key first, then reads the body
under the gateway's size and nesting limits (`gateway.http.body`), and hands FastAPI a request
that replays it.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any

from fastapi import Request, Response
from fastapi.routing import APIRoute
from starlette.types import Message

from gateway.config import app_settings
from gateway.http.body import read_body
from gateway.identity import require_admin

Endpoint = Callable[[Request], Coroutine[Any, Any, Response]]


class AdminRoute(APIRoute):
    """A route for admins: the admin key, then the body under the limits, then the handler."""

    def get_route_handler(self) -> Endpoint:
        handler = super().get_route_handler()

        async def admin_first(request: Request) -> Response:
            await require_admin(request)
            body = await read_body(request, app_settings(request.app).max_body_bytes)
            return await handler(_replaying(request, body))

        return admin_first


def _replaying(request: Request, body: bytes) -> Request:
    """`request` with its receive channel answering `body` (already read) first."""
    replayed = False

    async def receive() -> Message:
        nonlocal replayed
        if not replayed:
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await request.receive()  # what comes after the body: a disconnect

    return Request(request.scope, receive)

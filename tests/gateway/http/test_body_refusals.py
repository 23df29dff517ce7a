"""One answer to a wrong-shaped body on every route that takes one: the same code, whichever
route it was sent to (a contract over the app's own route table, so a new route is held to it).
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from fastapi.routing import iter_route_contexts

from gateway.assembly import create_app
from gateway.config import Settings
from tests.helpers import admin_headers, registered_token, serf_in

pytestmark = pytest.mark.anyio

BODY_METHODS = {"POST", "PUT", "PATCH"}
# What each path parameter is filled with: a route with a parameter not named here fails the
# test, so whoever adds it says what the route is called with.
PATH_VALUES = {
    "name": "echo",
    "namespace": "team",
    "path": "message:send",
    "task_id": "t1",
    "approval_id": "ap_" + "0" * 32,
}
# Forms for people, not JSON for agents: the console's pages answer in HTML.
NOT_JSON = ("/console",)
WRONG_SHAPES = {  # JSON that no route's body can be: a list, a string, a number, an object
    "list": b"[1, 2]",
    "string": b'"hello"',
    "number": b"42",
    "object": b'{"unexpected": {"nested": [true]}}',
}
NOT_JSON_BODY = b'{"writes": [{"key": "k", "value": '


def _body_routes(app: FastAPI) -> list[tuple[str, str]]:
    """(method, path) of every JSON route that takes a body, its parameters filled in."""
    routes = []
    for route in iter_route_contexts(app.router.routes):
        path = route.path_format
        if path is None or path.startswith(NOT_JSON):
            continue
        for method in sorted((route.methods or set()) & BODY_METHODS):
            filled = re.sub(r"{(\w+)(:\w+)?}", lambda m: PATH_VALUES[m.group(1)], path)
            routes.append((method, filled))
    return routes


@pytest.fixture
async def gateway(settings: Settings) -> AsyncIterator[tuple[FastAPI, httpx.AsyncClient]]:
    app = create_app(settings.model_copy(update={"sandbox_backend": "inprocess"}))
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://gateway") as client:
            yield app, client


def _code(answer: httpx.Response) -> tuple[int, str]:
    """(HTTP status, SERF code) of a SERF envelope; /mcp and /a2a answer JSON-RPC, whose errors
    come in a 200 with the SERF envelope in the error's `data`: (400, its code) for comparing."""
    body: dict[str, Any] = answer.json()
    envelope, _ = serf_in(body)
    if "jsonrpc" in body:
        assert answer.status_code == 200, answer.text
        return 400, envelope["code"]
    return answer.status_code, envelope["code"]


async def _answers(
    gateway: tuple[FastAPI, httpx.AsyncClient], settings: Settings, body: bytes
) -> dict[str, Any]:
    app, client = gateway
    admin = admin_headers(settings)
    token = await registered_token(
        client, admin, "acme", "shaper", tools=["*"], namespaces={"team": "write"}
    )
    headers = {
        **admin,
        "Authorization": f"Bearer {token}",
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
    }
    routes = _body_routes(app)
    assert len(routes) >= 6, routes  # tools, /mcp, a namespace, leases, commit, agents
    return {
        f"{method} {path}": _code(await client.request(method, path, content=body, headers=headers))
        for method, path in routes
    }


async def test_the_same_bad_body_gets_the_same_code_on_every_route(
    gateway: tuple[FastAPI, httpx.AsyncClient], settings: Settings
) -> None:
    """JSON of the wrong shape is the caller's request gone wrong, 400 INVALID_REQUEST (a
    tool's arguments its schema refuses are 422 INVALID_ARGUMENTS, checked by dispatch); a
    body that is not JSON at all is 400 PARSE_ERROR."""
    for shape, body in WRONG_SHAPES.items():
        answers = await _answers(gateway, settings, body)
        assert answers == dict.fromkeys(answers, (400, "INVALID_REQUEST")), shape
    answers = await _answers(gateway, settings, NOT_JSON_BODY)
    assert answers == dict.fromkeys(answers, (400, "PARSE_ERROR"))

"""The hot routes answer like the full stack: the same tool call, the same refusals."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import httpx
import pytest
from fastapi import APIRouter, FastAPI, Request, Response
from fastapi.responses import JSONResponse
from fastapi.routing import RouteContext, iter_route_contexts
from starlette.convertors import PathConvertor
from starlette.routing import Match
from starlette.types import Scope

from gateway.config import Settings
from gateway.http import GatewayApp, build_http_app
from gateway.http.fast_path import FastPath
from gateway.http.hot_routes import hot_handler_of, hot_route
from gateway.identity.tokens import issue_token

pytestmark = pytest.mark.anyio


def _auth(settings: Settings) -> dict[str, str]:
    token = issue_token(settings, tenant="fast", agent="a", scopes=["tool:echo"])
    return {"Authorization": f"Bearer {token}"}


async def test_a_tool_call_on_the_hot_path_answers_and_refuses_as_before(
    client: httpx.AsyncClient, settings: Settings
) -> None:
    ok = await client.post(
        "/v1/tools/echo/call", json={"arguments": {"message": "hi"}}, headers=_auth(settings)
    )
    assert ok.status_code == 200
    assert ok.json()["tool"] == "echo"
    unauthenticated = await client.post("/v1/tools/echo/call", json={"arguments": {}})
    assert unauthenticated.status_code == 401
    assert unauthenticated.json()["code"] == "AUTH_REQUIRED"
    # RFC 6750's challenge, naming where the OAuth metadata is (RFC 9728).
    assert unauthenticated.headers["WWW-Authenticate"] == (
        'Bearer resource_metadata="http://gateway/.well-known/oauth-protected-resource/mcp"'
    )


async def test_other_methods_and_paths_still_take_the_full_stack(
    client: httpx.AsyncClient, settings: Settings
) -> None:
    no_session = await client.delete("/mcp", headers=_auth(settings))
    assert no_session.status_code == 405  # the /mcp DELETE route, not the hot POST handler
    assert set(no_session.headers["Allow"].split(", ")) - {"HEAD"} == {"GET", "POST"}
    not_a_stream = await client.get("/mcp", headers=_auth(settings))  # no Accept for SSE
    assert not_a_stream.status_code == 400
    assert not_a_stream.json()["code"] == "INVALID_REQUEST"
    nested = await client.post("/v1/tools/a/b/call", json={}, headers=_auth(settings))
    assert nested.status_code == 404
    assert nested.json()["code"] == "NOT_FOUND"
    listing = await client.get("/v1/tools", headers=_auth(settings))
    assert [spec["name"] for spec in listing.json()] == ["echo"]


async def test_state_routes_on_the_hot_path_keep_their_answers(
    client: httpx.AsyncClient, settings: Settings
) -> None:
    token = issue_token(settings, tenant="fast", agent="a", scopes=["state:*:write"])
    headers = {"Authorization": f"Bearer {token}"}
    assert (await client.put("/v1/state/ns", json={}, headers=headers)).status_code == 201
    unauthenticated = await client.post("/v1/state/ns/commit", json={"writes": []})
    assert unauthenticated.status_code == 401
    assert unauthenticated.json()["code"] == "AUTH_REQUIRED"
    write = {"writes": [{"key": "a/b", "value": 1}]}
    assert (await client.post("/v1/state/ns/commit", json=write, headers=headers)).is_success
    read = await client.get("/v1/state/ns/a/b", headers=headers)
    assert (read.json()["value"], read.json()["version"]) == (1, 1)
    leased = await client.post("/v1/state/ns/leases", json={"keys": ["a/b"]}, headers=headers)
    assert leased.status_code == 200
    released = await client.delete("/v1/state/ns/leases/a/b", headers=headers)
    assert released.status_code == 204
    # The namespace itself and its history (query parameters, validated) take the full stack.
    described = await client.get("/v1/state/ns", headers=headers)
    assert described.json()["config"]["mode"] == "optimistic"
    history = await client.get("/v1/state/ns/history", params={"after": "x"}, headers=headers)
    assert history.status_code == 400
    assert history.json()["code"] == "INVALID_REQUEST" and "after" in history.json()["param_hints"]


@asynccontextmanager
async def _no_lifespan(app: FastAPI) -> AsyncIterator[None]:
    yield


def _router_choice(routes: list[RouteContext], scope: Scope) -> tuple[RouteContext, Scope] | None:
    """The route the router would take for `scope` (the first full match), and its scope."""
    for route in routes:
        match, child = route.matches(scope)
        if match is Match.FULL:
            return route, child
    return None


def test_every_request_takes_the_route_the_router_would_take() -> None:
    """For a path made from each of the gateway's routes, and a few near misses, in every
    method: the fast path serves it exactly when the router's first match is a hot route, with
    the router's path parameters. A sub-route declared before a hot catch-all stays its own."""
    app = build_http_app(_no_lifespan)
    routes = list(iter_route_contexts(app.router.routes))
    paths = {"/v1/state/ns/", "/v1/tools/a/b/call", "/mcp/", "/v1/state/ns/history/x"}
    for route in routes:
        sample = {
            name: "a/b" if isinstance(convertor, PathConvertor) else "x"
            for name, convertor in route.param_convertors.items()
        }
        paths.add(str(route.path_format).format(**sample))
    methods = {method for route in routes for method in route.methods or ()} | {"PATCH"}
    fast_path = FastPath(app.router.routes)
    served: set[str] = set()
    for method in sorted(methods):
        for path in sorted(paths):
            scope: Scope = {"type": "http", "method": method, "path": path, "root_path": ""}
            choice = _router_choice(routes, scope)
            hot_choice = choice is not None and hot_handler_of(choice[0]) is not None
            assert (fast_path.handler(scope) is not None) == hot_choice, (method, path)
            if choice is not None and hot_choice:
                assert scope.get("path_params", {}) == choice[1]["path_params"], (method, path)
                served.add(f"{method} {path}")
    # Not vacuous: every hot route was served; its sub-route before the catch-all was not.
    assert served >= {
        "POST /v1/tools/x/call",
        "POST /mcp",
        "GET /v1/state/x/a/b",
        "POST /v1/state/x/commit",
        "POST /v1/state/x/leases",
        "DELETE /v1/state/x/leases/a/b",
    }
    assert "GET /v1/state/x/history" not in served


async def _late(request: Request) -> Response:
    return JSONResponse({"route": "late", "name": request.path_params["name"]})


async def test_routes_declared_anywhere_are_seen_where_the_router_sees_them() -> None:
    router = APIRouter(prefix="/items")

    @router.get("/{item}/special")
    async def special(item: str) -> dict[str, str]:
        return {"route": "special", "item": item}

    @hot_route(router, "/items/{item}/{rest:path}", "GET")
    async def catch_all(request: Request) -> Response:
        item, rest = request.path_params["item"], request.path_params["rest"]
        return JSONResponse({"route": "catch-all", "item": item, "rest": rest})

    app = GatewayApp()
    app.include_router(router)
    hot_route(app, "/late/{name}", "POST")(_late)  # declared after the app was made

    @app.middleware("http")
    async def through_the_stack(
        request: Request, call_next: Callable[[Request], Awaitable[Response]]
    ) -> Response:
        response = await call_next(request)
        response.headers["X-Stack"] = "full"
        return response

    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://app") as client:
        special_answer = await client.get("/items/1/special")
        caught = await client.get("/items/1/a/b")
        late = await client.post("/late/x")
    assert special_answer.json() == {"route": "special", "item": "1"}
    assert special_answer.headers["X-Stack"] == "full"
    assert caught.json() == {"route": "catch-all", "item": "1", "rest": "a/b"}
    assert "X-Stack" not in caught.headers  # served ahead of the middleware
    assert late.json() == {"route": "late", "name": "x"}
    assert "X-Stack" not in late.headers

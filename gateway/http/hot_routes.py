"""Which routes are hot: declared once, with `@hot_route`, where the route is declared.

`@hot_route(router, path, *methods)` registers a plain Starlette endpoint (`Request ->
Response`) on the router and marks it hot; `gateway.http.fast_path` finds the marked routes
in the app's own route table, so a route declared beside a hot one (a sub-route before a hot
catch-all, say) is seen exactly where the router sees it. A hot endpoint reads and checks
its own input (path parameters from `request.path_params`, the body under the size limit):
the fast path skips FastAPI's dependency solving, so there is nothing for it to solve.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from fastapi.routing import iter_route_contexts
from pydantic import BaseModel, TypeAdapter
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute

Handler = Callable[[Request], Awaitable[Response]]
H = TypeVar("H", bound=Handler)

_MARK = "__conclave_hot__"
_DOC = "__conclave_hot_doc__"
_PARAMETER = re.compile(r"{(\w+)(?::\w+)?}")


@dataclass(frozen=True)
class _HotDoc:
    """What the OpenAPI document says of a hot route (FastAPI documents only its own)."""

    path: str
    methods: tuple[str, ...]
    body: type[BaseModel] | None
    answer: type[BaseModel] | None
    status: int
    summary: str


class _Routes(Protocol):
    def add_route(self, path: str, endpoint: Any, methods: list[str] | None = None) -> None: ...


def hot_route(
    router: _Routes,
    path: str,
    *methods: str,
    body: type[BaseModel] | None = None,
    answer: type[BaseModel] | None = None,
    status: int = 200,
) -> Callable[[H], H]:
    """Declare `path` on `router` for `methods`, served ahead of the middleware stack; `body`,
    `answer` and `status` are what the OpenAPI document shows for it."""

    def declare(endpoint: H) -> H:
        setattr(endpoint, _MARK, True)
        summary = (endpoint.__doc__ or "").strip().splitlines()[0] if endpoint.__doc__ else ""
        setattr(endpoint, _DOC, _HotDoc(path, methods, body, answer, status, summary))
        router.add_route(path, endpoint, methods=list(methods))  # add_route: no prefix
        return endpoint

    return declare


def hot_handler_of(route: Any) -> Handler | None:
    """The handler the fast path calls for `route`, or None: it is not hot."""
    endpoint = getattr(route, "endpoint", None)
    if endpoint is None or not getattr(endpoint, _MARK, False):
        return None
    handler: Handler = endpoint
    return handler


def document_hot_routes(schema: dict[str, Any], routes: Sequence[BaseRoute]) -> None:
    """Add the hot routes to an OpenAPI document FastAPI built without them, in place."""
    components = schema.setdefault("components", {}).setdefault("schemas", {})

    def ref(model: type[BaseModel]) -> dict[str, Any]:
        found = TypeAdapter(model).json_schema(ref_template="#/components/schemas/{model}")
        components.update(found.pop("$defs", {}))
        components[model.__name__] = found
        return {"$ref": f"#/components/schemas/{model.__name__}"}

    for route in iter_route_contexts(routes):  # through included routers, as the app sees them
        doc: _HotDoc | None = getattr(route.endpoint, _DOC, None)
        if doc is None:
            continue
        path = _PARAMETER.sub(r"{\1}", doc.path)
        parameters = [
            {"name": name, "in": "path", "required": True, "schema": {"type": "string"}}
            for name in _PARAMETER.findall(doc.path)
        ]
        for method in doc.methods:
            operation: dict[str, Any] = {"summary": doc.summary, "parameters": parameters}
            if doc.body is not None:
                content = {"application/json": {"schema": ref(doc.body)}}
                operation["requestBody"] = {"required": True, "content": content}
            answered: dict[str, Any] = {"description": "the answer"}
            if doc.answer is not None:
                answered["content"] = {"application/json": {"schema": ref(doc.answer)}}
            operation["responses"] = {str(doc.status): answered}
            schema.setdefault("paths", {}).setdefault(path, {})[method.lower()] = operation


__all__ = ["Handler", "document_hot_routes", "hot_handler_of", "hot_route"]

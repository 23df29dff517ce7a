"""The OpenAPI document at `/openapi.json`: every route the app serves, every refusal's body.

FastAPI documents its own routes; `complete_document` adds the others, in place: the hot
routes from what `@hot_route` declared (`gateway.http.hot_routes`), and any other plain
route (GET and DELETE `/mcp`) from its endpoint's docstring. Then every operation documents
its refusals: a 4XX or 5XX answer is the SERF envelope (on `POST /mcp`, a JSON-RPC error
carrying it in `error.data`). That replaces the 422 `HTTPValidationError` FastAPI assumes:
the gateway answers a malformed request with SERF too (`gateway.http.responses`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from fastapi.routing import RouteContext, iter_route_contexts
from pydantic import BaseModel, TypeAdapter
from starlette.routing import BaseRoute

from gateway.http.hot_routes import hot_doc_of
from protocol import SerfError

_PARAMETER = re.compile(r"{(\w+)(?::\w+)?}")
_FASTAPI_VALIDATION = ("HTTPValidationError", "ValidationError")


class _Components:
    """The document's `components.schemas`, filled as models are referred to."""

    def __init__(self, schema: dict[str, Any]) -> None:
        self.schemas: dict[str, Any] = schema.setdefault("components", {}).setdefault("schemas", {})

    def ref(self, model: type[BaseModel]) -> dict[str, Any]:
        found = TypeAdapter(model).json_schema(ref_template="#/components/schemas/{model}")
        self.schemas.update(found.pop("$defs", {}))
        self.schemas[model.__name__] = found
        return {"$ref": f"#/components/schemas/{model.__name__}"}

    def json(self, model: type[BaseModel]) -> dict[str, Any]:
        return {"application/json": {"schema": self.ref(model)}}


def _summary(route: RouteContext) -> str:
    doc = (getattr(route.endpoint, "__doc__", None) or "").strip()
    return doc.splitlines()[0] if doc else ""


def _operation(route: RouteContext, components: _Components) -> dict[str, Any]:
    """A plain route's operation: FastAPI never saw it."""
    path = route.path_format or ""
    parameters = [
        {"name": name, "in": "path", "required": True, "schema": {"type": "string"}}
        for name in _PARAMETER.findall(path)
    ]
    operation: dict[str, Any] = {"summary": _summary(route), "parameters": parameters}
    doc = hot_doc_of(route)
    if doc is None:
        operation["responses"] = {}
        return operation
    if doc.body is not None:
        operation["requestBody"] = {"required": True, "content": components.json(doc.body)}
    answered: dict[str, Any] = {"description": "the answer"}
    if doc.answer is not None:
        answered["content"] = components.json(doc.answer)
    operation["responses"] = {str(doc.status): answered}
    return operation


def _document_refusals(
    operation: dict[str, Any], refusal: type[BaseModel], components: _Components
) -> None:
    responses: dict[str, Any] = operation.setdefault("responses", {})
    responses.pop("422", None)  # FastAPI's HTTPValidationError: never what the gateway sends
    content = components.json(refusal)
    responses["4XX"] = {"description": "a refusal: the request cannot succeed as sent"}
    responses["5XX"] = {"description": "a failure on the gateway's side or beyond it"}
    for answer in (responses["4XX"], responses["5XX"]):
        answer["content"] = content


def complete_document(schema: dict[str, Any], routes: Sequence[BaseRoute]) -> None:
    """Add the routes FastAPI left out of `schema`, and every operation's refusals, in place."""
    components = _Components(schema)
    paths: dict[str, Any] = schema.setdefault("paths", {})
    for route in iter_route_contexts(routes):  # through included routers, as the app sees them
        if route.path_format is None or not getattr(route, "include_in_schema", True):
            continue
        path = _PARAMETER.sub(r"{\1}", route.path_format)
        doc = hot_doc_of(route)
        refusal = doc.refusal if doc is not None else SerfError
        for method in sorted((route.methods or set()) - {"HEAD"}):
            operations = paths.setdefault(path, {})
            operation = operations.get(method.lower())
            if operation is None:
                operation = operations[method.lower()] = _operation(route, components)
            _document_refusals(operation, refusal, components)
    for unused in _FASTAPI_VALIDATION:
        components.schemas.pop(unused, None)


__all__ = ["complete_document"]

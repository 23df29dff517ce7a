"""How every answer that is not a success goes on the wire: the SERF envelope as JSON.

`serf_response` gives the envelope its HTTP status and `Retry-After`; `method_not_allowed`
is the 405 for a method a path does not take; `refusal` is what a route answers when the
pipeline refused (with `WWW-Authenticate` on a 401 and the trace id
in `X-Conclave-Trace`); `install_error_handlers` makes FastAPI render whatever a route lets
out the same way, through the one `translate`.
"""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.routing import iter_route_contexts
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError
from starlette.datastructures import URL
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import Response
from starlette.routing import Match
from starlette.types import Message, Send
from starlette.types import Scope as AsgiScope

from gateway.gateway_error import GatewayError, translate
from gateway.identity import bearer_challenge, metadata_url
from protocol import ErrorCode, SerfError


def serf_response(error: SerfError, headers: dict[str, str] | None = None) -> JSONResponse:
    hdrs = dict(headers or {})
    if error.retry_after_ms is not None:
        hdrs["Retry-After"] = str(max(1, -(-error.retry_after_ms // 1000)))
    return JSONResponse(error.model_dump(mode="json"), status_code=error.http_status, headers=hdrs)


def _trace_id(request: Request) -> str | None:
    return getattr(request.state, "trace_id", None)


def refusal(error: SerfError) -> Response:
    """A route's answer when the pipeline refused or the call failed."""
    response = serf_response(error, challenge(error))
    if error.trace_id:
        response.headers["X-Conclave-Trace"] = error.trace_id
    return response


def challenge(error: SerfError) -> dict[str, str] | None:
    """`WWW-Authenticate` for a 401 or a scope refusal, as RFC 6750 asks of a bearer-token API
    (`resource_metadata` is added on the way out, by `with_resource_metadata`)."""
    value = bearer_challenge(error)
    return {"WWW-Authenticate": value} if value is not None else None


def with_resource_metadata(scope: AsgiScope, send: Send) -> Send:
    """`send`, adding `resource_metadata` (RFC 9728: where this gateway's metadata is, at the
    origin the client reached) to a Bearer challenge: every route's, the fast path's and the
    error handlers' alike."""

    async def sending(message: Message) -> None:
        if message["type"] == "http.response.start" and message["status"] in (401, 403):
            message["headers"] = [
                (k, _with_metadata(v, scope)) if k.lower() == b"www-authenticate" else (k, v)
                for k, v in message.get("headers") or ()
            ]
        await send(message)

    return sending


def _with_metadata(value: bytes, scope: AsgiScope) -> bytes:
    if not value.startswith(b"Bearer") or b"resource_metadata=" in value:
        return value
    url = URL(scope=scope)
    parameter = f'resource_metadata="{metadata_url(f"{url.scheme}://{url.netloc}")}"'
    separator = " " if value == b"Bearer" else ", "
    return value + (separator + parameter).encode("latin-1")


def method_not_allowed(
    method: str, path: str, allow: str, trace_id: str | None = None
) -> JSONResponse:
    """405 METHOD_NOT_ALLOWED for `method` on `path`, with the `Allow` header it takes."""
    error = SerfError.of(
        ErrorCode.METHOD_NOT_ALLOWED,
        f"{path} does not take {method}; send {allow or 'another method'}",
        details={"allow": [m.strip() for m in allow.split(",") if m.strip()]},
        trace_id=trace_id,
    )
    return serf_response(error, {"Allow": allow})


def _allowed_methods(request: Request) -> str:
    """Every method a route takes at the request's path: Starlette's `Allow` names only the
    first route's (`/v1/agents` takes GET and POST, on two routes)."""
    methods: set[str] = set()
    for route in iter_route_contexts(request.app.router.routes):
        match, _ = route.matches(request.scope)
        if match is not Match.NONE:
            methods |= route.methods or set()
    return ", ".join(sorted(methods))


def install_error_handlers(app: FastAPI) -> None:
    async def on_error(request: Request, exc: Exception) -> JSONResponse:
        error = translate(exc, _trace_id(request))
        return serf_response(error, challenge(error))

    async def on_http(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, StarletteHTTPException)
        trace_id = _trace_id(request)
        if exc.status_code == 405:  # the router's: the path exists, the method does not
            allow = _allowed_methods(request)
            return method_not_allowed(request.method, request.url.path, allow, trace_id)
        code = ErrorCode.NOT_FOUND if exc.status_code == 404 else ErrorCode.INVALID_REQUEST
        return serf_response(SerfError.of(code, str(exc.detail), trace_id=trace_id))

    app.add_exception_handler(GatewayError, on_error)
    app.add_exception_handler(RequestValidationError, on_error)
    app.add_exception_handler(RedisConnectionError, on_error)
    app.add_exception_handler(RedisTimeoutError, on_error)
    app.add_exception_handler(StarletteHTTPException, on_http)
    app.add_exception_handler(Exception, on_error)

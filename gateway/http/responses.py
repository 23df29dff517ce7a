"""How every answer that is not a success goes on the wire: the SERF envelope as JSON.

`serf_response` gives the envelope its HTTP status and `Retry-After`; `refusal` is what a
route answers when the pipeline refused (with `WWW-Authenticate` on a 401 and the trace id
in `X-Conclave-Trace`); `install_error_handlers` makes FastAPI render whatever a route lets
out the same way, through the one `translate`.
"""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import Response

from gateway.gateway_error import GatewayError, translate
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
    """`WWW-Authenticate` for a 401, as RFC 6750 asks of a bearer-token API."""
    return {"WWW-Authenticate": "Bearer"} if error.http_status == 401 else None


def install_error_handlers(app: FastAPI) -> None:
    async def on_error(request: Request, exc: Exception) -> JSONResponse:
        error = translate(exc, _trace_id(request))
        return serf_response(error, challenge(error))

    async def on_http(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, StarletteHTTPException)
        codes = {404: ErrorCode.NOT_FOUND, 405: ErrorCode.METHOD_NOT_FOUND}
        code = codes.get(exc.status_code, ErrorCode.INVALID_REQUEST)
        return serf_response(SerfError.of(code, str(exc.detail), trace_id=_trace_id(request)))

    app.add_exception_handler(GatewayError, on_error)
    app.add_exception_handler(RequestValidationError, on_error)
    app.add_exception_handler(RedisConnectionError, on_error)
    app.add_exception_handler(RedisTimeoutError, on_error)
    app.add_exception_handler(StarletteHTTPException, on_http)
    app.add_exception_handler(Exception, on_error)

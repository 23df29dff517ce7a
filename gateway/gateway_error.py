"""The gateway's root exception, and the one place foreign exceptions become SERF envelopes.

`GatewayError` carries a `SerfError`. `translate` is the one place where exceptions from
redis, validation and anything unexpected are mapped to codes; `gateway.http.responses`
renders every error as the envelope with its HTTP status.
"""

from __future__ import annotations

import logging
from typing import Any

from fastapi.exceptions import RequestValidationError
from pydantic import ValidationError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError
from redis.exceptions import TimeoutError as RedisTimeoutError

from protocol import ErrorCode, RecoveryAction, SerfError
from sandbox import unavailable_error
from tools import ToolArgumentsError

log = logging.getLogger("conclave.gateway")


class GatewayError(Exception):
    """A refusal or failure with its SERF envelope."""

    def __init__(self, error: SerfError) -> None:
        super().__init__(f"{error.code}: {error.message}")
        self.error = error

    @classmethod
    def of(cls, code: ErrorCode, message: str, **kwargs: Any) -> GatewayError:
        return cls(SerfError.of(code, message, **kwargs))


def validation_hints(exc: ValidationError | RequestValidationError) -> dict[str, str]:
    hints: dict[str, str] = {}
    for err in exc.errors():
        loc = [str(p) for p in err["loc"] if p not in ("body", "query", "path", "header")]
        hints[".".join(loc) or "(body)"] = err["msg"]
    return hints


def _malformed(exc: RequestValidationError | ValidationError, trace_id: str | None) -> SerfError:
    """The one answer to a request that does not parse, on every route: not JSON is
    PARSE_ERROR, JSON of the wrong shape INVALID_REQUEST (400: the caller's request is wrong;
    INVALID_ARGUMENTS is for a tool's arguments its schema refuses, and for a bad name)."""
    hints = validation_hints(exc)
    if any(e.get("type") == "json_invalid" for e in exc.errors()):
        return SerfError.of(
            ErrorCode.PARSE_ERROR,
            "the request body is not valid JSON",
            param_hints=hints,
            trace_id=trace_id,
        )
    if isinstance(exc, ValidationError):  # pydantic's own: its title names the model
        what = f"the request body is not a valid {exc.title}"
    else:  # FastAPI's, over the body, the query and the path at once
        what = "the request is malformed"
    return SerfError.of(
        ErrorCode.INVALID_REQUEST,
        what,
        param_hints=hints,
        trace_id=trace_id,
    )


def translate(exc: BaseException, trace_id: str | None = None) -> SerfError:
    """Map any exception to its SERF envelope. The only place foreign exceptions are read."""
    if isinstance(exc, GatewayError):
        return exc.error.model_copy(update={"trace_id": exc.error.trace_id or trace_id})
    if isinstance(exc, RedisConnectionError | RedisTimeoutError):
        return SerfError.of(
            ErrorCode.STATE_UNAVAILABLE,
            "the state store (Redis) is not reachable; retry shortly",
            retry_after_ms=500,
            trace_id=trace_id,
        )
    if isinstance(exc, RedisError) and "OOM command not allowed" in str(exc):  # also in Lua
        return SerfError.of(
            ErrorCode.STATE_UNAVAILABLE,
            "the state store (Redis) is full (maxmemory reached) and refuses writes; retry "
            "later, once keys are deleted or an operator raises its memory "
            "(CONCLAVE_REDIS_MAXMEMORY_MB for the embedded Redis)",
            trace_id=trace_id,
        )
    if isinstance(exc, RedisError):  # OOM, loading, read-only replica: the store refused
        return SerfError.of(
            ErrorCode.STATE_UNAVAILABLE,
            f"the state store (Redis) refused the operation ({type(exc).__name__}); retry shortly",
            trace_id=trace_id,
        )
    if isinstance(exc, ToolArgumentsError):
        return exc.as_serf().model_copy(update={"trace_id": trace_id})
    if (unavailable := unavailable_error(exc)) is not None:  # the sandbox layer's, or Docker's
        return unavailable.model_copy(update={"trace_id": trace_id})
    if isinstance(exc, RequestValidationError | ValidationError):
        return _malformed(exc, trace_id)
    log.exception("unexpected error", exc_info=exc)
    return SerfError.of(
        ErrorCode.INTERNAL,
        f"internal error ({type(exc).__name__}); the gateway logged it with this trace id",
        action=RecoveryAction.ABORT,
        trace_id=trace_id,
    )

"""Failures as A2A 1.0 names them, with the SERF envelope beside: JSON-RPC errors and HTTP+JSON
(AIP-193) errors.

An A2A-specific error carries the `google.rpc.ErrorInfo` the specification requires (reason,
domain `a2a-protocol.org`) in its `data` (JSON-RPC) or `details` (HTTP+JSON); every error the
gateway answers also carries its SERF envelope there (`@type` `SERF_TYPE`), so an agent that
reads SERF learns what to do next whichever way it asked. What the gateway refuses before the
request reaches A2A's own semantics (authentication, scope, rate, size) keeps its SERF HTTP
status on either binding; the rest answer as the binding says (JSON-RPC: 200).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gateway.gateway_error import GatewayError
from protocol import CODE_TABLE, ErrorCode, SerfError

SERF_TYPE = "type.conclave.dev/conclave.SerfError"
_ERROR_INFO = "type.googleapis.com/google.rpc.ErrorInfo"


@dataclass(frozen=True)
class A2aErrorType:
    reason: str  # UPPER_SNAKE_CASE, no "Error" suffix
    rpc_code: int
    http_status: int
    status: str  # google.rpc.Code name, HTTP+JSON's `error.status`
    message: str


_KINDS: dict[str, A2aErrorType] = {}  # by reason: every kind the gateway answers


def _kind(reason: str, rpc_code: int, http_status: int, status: str, message: str) -> A2aErrorType:
    _KINDS[reason] = kind = A2aErrorType(reason, rpc_code, http_status, status, message)
    return kind


TASK_NOT_FOUND = _kind("TASK_NOT_FOUND", -32001, 404, "NOT_FOUND", "Task not found")
INVALID_AGENT_RESPONSE = _kind(
    "INVALID_AGENT_RESPONSE", -32006, 502, "INTERNAL", "Invalid agent response"
)
TASK_NOT_CANCELABLE = _kind(
    "TASK_NOT_CANCELABLE", -32002, 409, "FAILED_PRECONDITION", "Task cannot be canceled"
)
UNSUPPORTED_OPERATION = _kind(
    "UNSUPPORTED_OPERATION", -32004, 400, "UNIMPLEMENTED", "Unsupported operation"
)
PUSH_NOT_SUPPORTED = _kind(
    "PUSH_NOTIFICATION_NOT_SUPPORTED",
    -32003,
    400,
    "UNIMPLEMENTED",
    "Push notifications are not supported",
)
CONTENT_TYPE_NOT_SUPPORTED = _kind(
    "CONTENT_TYPE_NOT_SUPPORTED", -32005, 415, "INVALID_ARGUMENT", "Content type not supported"
)
VERSION_NOT_SUPPORTED = _kind(
    "VERSION_NOT_SUPPORTED", -32009, 400, "UNIMPLEMENTED", "Protocol version not supported"
)
# JSON-RPC's own (no ErrorInfo: not A2A-specific)
PARSE = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL = -32603

# SERF codes refused at the transport: they keep their HTTP status on JSON-RPC too.
_TRANSPORT = frozenset(
    {
        ErrorCode.AUTH_REQUIRED,
        ErrorCode.AUTH_INVALID,
        ErrorCode.AUTH_EXPIRED,
        ErrorCode.AUTH_REVOKED,
        ErrorCode.AGENT_NOT_ALLOWED,
        ErrorCode.DELEGATION_LOOP,
        ErrorCode.NOT_FOUND,
        ErrorCode.PAYLOAD_TOO_LARGE,
        ErrorCode.RATE_LIMITED,
        ErrorCode.SHUTTING_DOWN,
    }
)
_RPC_CODE = {
    ErrorCode.PARSE_ERROR: PARSE,
    ErrorCode.INVALID_REQUEST: INVALID_REQUEST,
    ErrorCode.PAYLOAD_TOO_LARGE: INVALID_REQUEST,
    ErrorCode.METHOD_NOT_FOUND: METHOD_NOT_FOUND,
    ErrorCode.NOT_FOUND: METHOD_NOT_FOUND,  # no such agent: nothing here answers the method
    ErrorCode.INVALID_ARGUMENTS: INVALID_PARAMS,
}
_REST_STATUS = {  # google.rpc.Code by HTTP status
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    405: "UNIMPLEMENTED",
    409: "FAILED_PRECONDITION",
    413: "INVALID_ARGUMENT",
    415: "INVALID_ARGUMENT",
    422: "INVALID_ARGUMENT",
    429: "RESOURCE_EXHAUSTED",
    499: "CANCELLED",
    502: "INTERNAL",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}


def a2a_failure(kind: A2aErrorType, code: ErrorCode, message: str) -> GatewayError:
    """A refusal A2A names (`kind`), as the SERF `code` explains it: the envelope's details
    name the A2A error, so whichever binding answers it answers it as A2A says."""
    return GatewayError.of(code, message, details={"a2a_error": kind.reason})


def task_not_found(agent: str, task_id: str) -> GatewayError:
    """TaskNotFoundError for `task_id`: unknown, or another identity's (the same answer)."""
    return a2a_failure(
        TASK_NOT_FOUND,
        ErrorCode.NOT_FOUND,
        f"A2A agent {agent!r} has no task {task_id[:64]!r} of yours: a task is answered only to"
        " the identity that created it",
    )


def _kind_of(serf: SerfError) -> A2aErrorType | None:
    return _KINDS.get(str(serf.details.get("a2a_error", "")))


def _details(serf: SerfError, kind: A2aErrorType | None) -> list[dict[str, Any]]:
    details: list[dict[str, Any]] = []
    if kind is not None:
        details.append({"@type": _ERROR_INFO, "reason": kind.reason, "domain": "a2a-protocol.org"})
    details.append({"@type": SERF_TYPE, **serf.model_dump(mode="json", exclude_none=True)})
    return details


def rpc_error(request_id: Any, serf: SerfError) -> tuple[int, dict[str, Any]]:
    """(HTTP status, JSON-RPC error response) for `serf`, as A2A names it when it does."""
    kind = _kind_of(serf)
    if kind is not None:
        code, status = kind.rpc_code, 200
    else:
        code = _RPC_CODE.get(serf.code, INTERNAL)
        status = CODE_TABLE[serf.code].http_status if serf.code in _TRANSPORT else 200
    error = {"code": code, "message": serf.message, "data": _details(serf, kind)}
    return status, {"jsonrpc": "2.0", "id": request_id, "error": error}


def rest_error(serf: SerfError) -> tuple[int, dict[str, Any]]:
    """(HTTP status, AIP-193 error body) for `serf`, as A2A names it when it does."""
    kind = _kind_of(serf)
    status = kind.http_status if kind is not None else CODE_TABLE[serf.code].http_status
    name = kind.status if kind is not None else _REST_STATUS.get(status, "INTERNAL")
    error = {"code": status, "status": name, "message": serf.message}
    return status, {"error": {**error, "details": _details(serf, kind)}}

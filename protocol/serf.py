"""SERF: the one error envelope every layer answers with.

A failure is a stable `ErrorCode`; everything else an agent needs to recover (category,
whether to retry, what to do next, the HTTP status) is looked up in `CODE_TABLE`, so the
same code always means the same thing on HTTP, in MCP and inside the SDK.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class ErrorCategory(StrEnum):
    AUTH = "auth"
    POLICY = "policy"
    CALLER = "caller"
    CONFLICT = "conflict"
    BUDGET = "budget"
    TRANSIENT = "transient"
    RESOURCE = "resource"
    UPSTREAM = "upstream"
    INTERNAL = "internal"


class RecoveryAction(StrEnum):
    RETRY_SAME = "retry_same"
    RETRY_BACKOFF = "retry_backoff"
    FIX_ARGS = "fix_args"
    REAUTH = "reauth"
    REREAD_AND_RETRY = "reread_and_retry"
    REACQUIRE = "reacquire"
    SWITCH_TOOL = "switch_tool"
    REPLAN = "replan"
    ABORT = "abort"


class ErrorCode(StrEnum):
    # auth
    AUTH_REQUIRED = "AUTH_REQUIRED"
    AUTH_INVALID = "AUTH_INVALID"
    AUTH_EXPIRED = "AUTH_EXPIRED"
    AUTH_REVOKED = "AUTH_REVOKED"
    # policy
    TOOL_NOT_ALLOWED = "TOOL_NOT_ALLOWED"
    AGENT_NOT_ALLOWED = "AGENT_NOT_ALLOWED"  # an A2A agent the caller may not delegate to
    DELEGATION_LOOP = "DELEGATION_LOOP"  # an A2A chain too deep, or back to an agent on it
    POLICY_DENIED = "POLICY_DENIED"  # a policy rule refused the call (its name in details)
    # A person denied a call an `approve` rule held (their note in details), or nobody
    # decided before its deadline or the rule's approval TTL
    APPROVAL_DENIED = "APPROVAL_DENIED"
    APPROVAL_EXPIRED = "APPROVAL_EXPIRED"
    PERMISSION_DENIED = "PERMISSION_DENIED"  # a tool refused an operation (PermissionError)
    NAMESPACE_FORBIDDEN = "NAMESPACE_FORBIDDEN"
    ADMIN_REQUIRED = "ADMIN_REQUIRED"
    # caller
    INVALID_REQUEST = "INVALID_REQUEST"
    INVALID_ARGUMENTS = "INVALID_ARGUMENTS"
    PAYLOAD_TOO_LARGE = "PAYLOAD_TOO_LARGE"
    TOOL_NOT_FOUND = "TOOL_NOT_FOUND"
    NAMESPACE_NOT_FOUND = "NAMESPACE_NOT_FOUND"
    NOT_FOUND = "NOT_FOUND"
    METHOD_NOT_FOUND = "METHOD_NOT_FOUND"
    METHOD_NOT_ALLOWED = "METHOD_NOT_ALLOWED"  # an HTTP method the path does not take
    # The call needs a client feature (sampling, elicitation, roots) the request did not
    # declare (MCP 2026-07-28's MissingRequiredClientCapability, -32021)
    CLIENT_CAPABILITY_MISSING = "CLIENT_CAPABILITY_MISSING"
    PARSE_ERROR = "PARSE_ERROR"
    LIMIT_ABOVE_INTENT = "LIMIT_ABOVE_INTENT"
    # the caller cancelled the call (MCP notifications/cancelled) or closed its connection
    CANCELLED = "CANCELLED"
    # conflict
    STATE_CONFLICT = "STATE_CONFLICT"
    LEASE_HELD = "LEASE_HELD"
    LEASE_REQUIRED = "LEASE_REQUIRED"
    LEASE_EXPIRED = "LEASE_EXPIRED"
    FENCED = "FENCED"
    # budget
    BUDGET_EXHAUSTED = "BUDGET_EXHAUSTED"
    DEADLINE_EXCEEDED = "DEADLINE_EXCEEDED"
    TOOL_TIMEOUT = "TOOL_TIMEOUT"
    RATE_LIMITED = "RATE_LIMITED"
    # transient
    STATE_UNAVAILABLE = "STATE_UNAVAILABLE"
    SANDBOX_UNAVAILABLE = "SANDBOX_UNAVAILABLE"
    UPSTREAM_UNAVAILABLE = "UPSTREAM_UNAVAILABLE"
    # durability "replicated": the write was made but no replica confirmed it in time
    DURABILITY_UNCONFIRMED = "DURABILITY_UNCONFIRMED"
    # the gateway is stopping: the call was cut after the shutdown grace; retry elsewhere or later
    SHUTTING_DOWN = "SHUTTING_DOWN"
    # resource
    SANDBOX_OOM = "SANDBOX_OOM"
    SANDBOX_CPU_LIMIT = "SANDBOX_CPU_LIMIT"
    SANDBOX_OUTPUT_LIMIT = "SANDBOX_OUTPUT_LIMIT"
    SANDBOX_KILLED = "SANDBOX_KILLED"
    SANDBOX_DISK_FULL = "SANDBOX_DISK_FULL"  # the sandbox's workspace quota (bytes or files)
    STATE_QUOTA_EXCEEDED = "STATE_QUOTA_EXCEEDED"  # the tenant's state quota (keys or bytes)
    # upstream
    TOOL_FAILED = "TOOL_FAILED"
    # internal
    INTERNAL = "INTERNAL"


@dataclass(frozen=True)
class CodeInfo:
    """What a code means for whoever receives it."""

    category: ErrorCategory
    http_status: int
    retryable: bool
    action: RecoveryAction
    retry_after_ms: int | None = None  # the default wait for retryable codes


_C = ErrorCategory
_A = RecoveryAction

CODE_TABLE: dict[ErrorCode, CodeInfo] = {
    ErrorCode.AUTH_REQUIRED: CodeInfo(_C.AUTH, 401, False, _A.REAUTH),
    ErrorCode.AUTH_INVALID: CodeInfo(_C.AUTH, 401, False, _A.REAUTH),
    ErrorCode.AUTH_EXPIRED: CodeInfo(_C.AUTH, 401, False, _A.REAUTH),
    ErrorCode.AUTH_REVOKED: CodeInfo(_C.AUTH, 401, False, _A.ABORT),
    ErrorCode.TOOL_NOT_ALLOWED: CodeInfo(_C.POLICY, 403, False, _A.SWITCH_TOOL),
    ErrorCode.AGENT_NOT_ALLOWED: CodeInfo(_C.POLICY, 403, False, _A.REPLAN),
    ErrorCode.POLICY_DENIED: CodeInfo(_C.POLICY, 403, False, _A.REPLAN),
    ErrorCode.DELEGATION_LOOP: CodeInfo(_C.POLICY, 403, False, _A.REPLAN),
    ErrorCode.APPROVAL_DENIED: CodeInfo(_C.POLICY, 403, False, _A.REPLAN),
    ErrorCode.APPROVAL_EXPIRED: CodeInfo(_C.POLICY, 410, False, _A.REPLAN),
    ErrorCode.PERMISSION_DENIED: CodeInfo(_C.POLICY, 403, False, _A.ABORT),
    ErrorCode.NAMESPACE_FORBIDDEN: CodeInfo(_C.POLICY, 403, False, _A.ABORT),
    ErrorCode.ADMIN_REQUIRED: CodeInfo(_C.POLICY, 403, False, _A.ABORT),
    ErrorCode.INVALID_REQUEST: CodeInfo(_C.CALLER, 400, False, _A.FIX_ARGS),
    ErrorCode.INVALID_ARGUMENTS: CodeInfo(_C.CALLER, 422, False, _A.FIX_ARGS),
    ErrorCode.PAYLOAD_TOO_LARGE: CodeInfo(_C.CALLER, 413, False, _A.FIX_ARGS),
    ErrorCode.TOOL_NOT_FOUND: CodeInfo(_C.CALLER, 404, False, _A.SWITCH_TOOL),
    ErrorCode.NAMESPACE_NOT_FOUND: CodeInfo(_C.CALLER, 404, False, _A.ABORT),
    ErrorCode.NOT_FOUND: CodeInfo(_C.CALLER, 404, False, _A.REPLAN),
    ErrorCode.METHOD_NOT_FOUND: CodeInfo(_C.CALLER, 404, False, _A.ABORT),
    ErrorCode.METHOD_NOT_ALLOWED: CodeInfo(_C.CALLER, 405, False, _A.FIX_ARGS),
    ErrorCode.CLIENT_CAPABILITY_MISSING: CodeInfo(_C.CALLER, 400, False, _A.SWITCH_TOOL),
    ErrorCode.PARSE_ERROR: CodeInfo(_C.CALLER, 400, False, _A.FIX_ARGS),
    ErrorCode.LIMIT_ABOVE_INTENT: CodeInfo(_C.CALLER, 422, False, _A.FIX_ARGS),
    # 499: nginx's "client closed request"; the caller that went away never reads it anyway
    ErrorCode.CANCELLED: CodeInfo(_C.CALLER, 499, False, _A.ABORT),
    ErrorCode.STATE_CONFLICT: CodeInfo(_C.CONFLICT, 409, True, _A.REREAD_AND_RETRY),
    ErrorCode.LEASE_HELD: CodeInfo(_C.CONFLICT, 409, True, _A.RETRY_BACKOFF, 250),
    ErrorCode.LEASE_REQUIRED: CodeInfo(_C.CONFLICT, 409, True, _A.REACQUIRE),
    ErrorCode.LEASE_EXPIRED: CodeInfo(_C.CONFLICT, 409, True, _A.REACQUIRE),
    ErrorCode.FENCED: CodeInfo(_C.CONFLICT, 409, True, _A.REACQUIRE),
    ErrorCode.BUDGET_EXHAUSTED: CodeInfo(_C.BUDGET, 504, False, _A.REPLAN),
    ErrorCode.DEADLINE_EXCEEDED: CodeInfo(_C.BUDGET, 504, False, _A.ABORT),
    ErrorCode.TOOL_TIMEOUT: CodeInfo(_C.BUDGET, 504, True, _A.REPLAN),
    ErrorCode.RATE_LIMITED: CodeInfo(_C.BUDGET, 429, True, _A.RETRY_BACKOFF, 250),
    ErrorCode.STATE_UNAVAILABLE: CodeInfo(_C.TRANSIENT, 503, True, _A.RETRY_BACKOFF, 500),
    ErrorCode.SANDBOX_UNAVAILABLE: CodeInfo(_C.TRANSIENT, 503, True, _A.RETRY_BACKOFF, 500),
    ErrorCode.UPSTREAM_UNAVAILABLE: CodeInfo(_C.TRANSIENT, 503, True, _A.RETRY_BACKOFF, 250),
    ErrorCode.DURABILITY_UNCONFIRMED: CodeInfo(_C.TRANSIENT, 503, True, _A.RETRY_BACKOFF, 500),
    ErrorCode.SHUTTING_DOWN: CodeInfo(_C.TRANSIENT, 503, True, _A.RETRY_BACKOFF, 1000),
    ErrorCode.SANDBOX_OOM: CodeInfo(_C.RESOURCE, 507, False, _A.FIX_ARGS),
    ErrorCode.SANDBOX_CPU_LIMIT: CodeInfo(_C.RESOURCE, 507, False, _A.FIX_ARGS),
    ErrorCode.SANDBOX_OUTPUT_LIMIT: CodeInfo(_C.RESOURCE, 507, False, _A.FIX_ARGS),
    ErrorCode.SANDBOX_KILLED: CodeInfo(_C.RESOURCE, 507, False, _A.REPLAN),
    ErrorCode.SANDBOX_DISK_FULL: CodeInfo(_C.RESOURCE, 507, False, _A.FIX_ARGS),
    ErrorCode.STATE_QUOTA_EXCEEDED: CodeInfo(_C.RESOURCE, 507, False, _A.REPLAN),
    ErrorCode.TOOL_FAILED: CodeInfo(_C.UPSTREAM, 502, False, _A.REPLAN),
    ErrorCode.INTERNAL: CodeInfo(_C.INTERNAL, 500, False, _A.ABORT),
}


def code_info(code: ErrorCode) -> CodeInfo:
    return CODE_TABLE[code]


class ConflictDetail(BaseModel):
    """One key that made a state operation fail, and what it looks like now."""

    model_config = ConfigDict(extra="forbid")

    key: str
    reason: str
    expected_version: int | None = None
    current_version: int | None = None
    owner: str | None = None
    lease_expires_at_ms: int | None = None
    # STATE_CONFLICT: the key's value at current_version (absent: null or no value), so the
    # caller can retry from it without reading again; it declares current_version in read_set.
    current_value: Any = None


class SerfError(BaseModel):
    """The wire envelope. Build it with `SerfError.of(code, message, ...)`."""

    model_config = ConfigDict(extra="forbid")

    code: ErrorCode
    category: ErrorCategory
    retryable: bool
    retry_after_ms: int | None = Field(default=None, ge=0)
    action: RecoveryAction
    message: str
    param_hints: dict[str, str] = Field(default_factory=dict)
    trace_id: str | None = None
    details: dict[str, Any] = Field(default_factory=dict)

    @classmethod
    def of(
        cls,
        code: ErrorCode,
        message: str,
        *,
        retry_after_ms: int | None = None,
        action: RecoveryAction | None = None,
        param_hints: dict[str, str] | None = None,
        trace_id: str | None = None,
        details: dict[str, Any] | None = None,
    ) -> SerfError:
        info = CODE_TABLE[code]
        return cls(
            code=code,
            category=info.category,
            retryable=info.retryable,
            retry_after_ms=retry_after_ms if retry_after_ms is not None else info.retry_after_ms,
            action=action or info.action,
            message=message,
            param_hints=param_hints or {},
            trace_id=trace_id,
            details=details or {},
        )

    @property
    def http_status(self) -> int:
        return CODE_TABLE[self.code].http_status

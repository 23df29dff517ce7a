"""What a tool's exception means: the SERF code each exception type becomes.

Tool code raises ordinary Python exceptions, or the few below when it wants a specific
recovery (a rate limit, a conflict, a flaky upstream). The sandbox runner reports an
exception by the names of its type's MRO across the process boundary, so the mapping is by
name (`TOOL_EXCEPTION_CODES`). `tool_exception_code` is the one mapping: each executor calls
it once, where it turns a tool's exception into the call's SERF error (the sandbox from the
runner's names, the in-process executor from the live exception), and nothing maps it again.
Anything unlisted is `TOOL_FAILED`.

A caller's mistake is not the tool's fault: a missing file or key, a path that is not what
the caller said, a refused permission map to caller/policy codes (NOT_FOUND,
PERMISSION_DENIED), which never count against the tool's circuit breaker. A tool says that
the caller's input is bad with `ToolArgumentsError` (INVALID_ARGUMENTS); a bare ValueError
stays TOOL_FAILED, since the tool's own bugs raise it too.
"""

from __future__ import annotations

from collections.abc import Sequence

from protocol import ErrorCode


class ToolUnavailable(ConnectionError):
    """The tool's upstream is down or flaky; trying again later may work."""


class ToolRateLimited(Exception):
    """The tool's upstream refused for rate; wait before calling again."""


class ToolConflict(Exception):
    """The tool saw a newer version than the caller expected; re-read, then retry."""


class ToolPermissionDenied(PermissionError):
    """The tool refused an operation the caller is not allowed to perform."""


TOOL_EXCEPTION_CODES: dict[str, ErrorCode] = {
    # upstream trouble: retry with backoff (or switch tool when the breaker opens)
    "ToolUnavailable": ErrorCode.UPSTREAM_UNAVAILABLE,
    "ConnectionError": ErrorCode.UPSTREAM_UNAVAILABLE,
    "ConnectionRefusedError": ErrorCode.UPSTREAM_UNAVAILABLE,
    "ConnectionResetError": ErrorCode.UPSTREAM_UNAVAILABLE,
    "ConnectionAbortedError": ErrorCode.UPSTREAM_UNAVAILABLE,
    "TimeoutError": ErrorCode.UPSTREAM_UNAVAILABLE,
    "ToolRateLimited": ErrorCode.RATE_LIMITED,
    "ToolConflict": ErrorCode.STATE_CONFLICT,
    "ToolPermissionDenied": ErrorCode.PERMISSION_DENIED,
    "PermissionError": ErrorCode.PERMISSION_DENIED,
    # the caller named something that is not there: not the tool's fault
    "FileNotFoundError": ErrorCode.NOT_FOUND,
    "IsADirectoryError": ErrorCode.NOT_FOUND,
    "NotADirectoryError": ErrorCode.NOT_FOUND,
    "KeyError": ErrorCode.NOT_FOUND,
    "MemoryError": ErrorCode.SANDBOX_OOM,
}


def tool_exception_code(exc: BaseException | str | Sequence[str]) -> ErrorCode:
    """The SERF code for a tool's exception: a live one, its type name, or the names of its
    type's MRO as the runner reports them (the first listed name decides)."""
    if isinstance(exc, BaseException):
        names: Sequence[str] = [cls.__name__ for cls in type(exc).__mro__]
    elif isinstance(exc, str):
        names = [exc.rsplit(".", 1)[-1]]
    else:
        names = exc
    for name in names:
        code = TOOL_EXCEPTION_CODES.get(name)
        if code is not None:
            return code
    return ErrorCode.TOOL_FAILED

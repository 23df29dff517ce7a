"""What a tool's exception means: the SERF code each exception type becomes.

Tool code raises ordinary Python exceptions, or the few below when it wants a specific
recovery (a rate limit, a conflict, a flaky upstream). The sandbox runner reports an
exception by its type name across the process boundary, so the mapping is by name
(`TOOL_EXCEPTION_CODES`), and `tool_exception_code` also walks a live exception's MRO when
the tool ran in-process. Anything unlisted is `TOOL_FAILED`.
"""

from __future__ import annotations

from protocol.serf import ErrorCode


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
    "MemoryError": ErrorCode.SANDBOX_OOM,
}


def tool_exception_code(exc: BaseException | str) -> ErrorCode:
    """The SERF code for a tool's exception (a live one, or its type name from the runner)."""
    if isinstance(exc, str):
        return TOOL_EXCEPTION_CODES.get(exc.rsplit(".", 1)[-1], ErrorCode.TOOL_FAILED)
    for cls in type(exc).__mro__:
        code = TOOL_EXCEPTION_CODES.get(cls.__name__)
        if code is not None:
            return code
    return ErrorCode.TOOL_FAILED

"""The tool registry and the built-in tools."""

from tools import builtin
from tools.registry import (
    DuplicateToolError,
    RegisteredTool,
    ToolArgumentsError,
    ToolRegistry,
    build_tool,
    default_registry,
    tool,
)
from tools.tool_exceptions import (
    TOOL_EXCEPTION_CODES,
    ToolConflict,
    ToolPermissionDenied,
    ToolRateLimited,
    ToolUnavailable,
    tool_exception_code,
)

__all__ = [
    "TOOL_EXCEPTION_CODES",
    "DuplicateToolError",
    "RegisteredTool",
    "ToolArgumentsError",
    "ToolConflict",
    "ToolPermissionDenied",
    "ToolRateLimited",
    "ToolRegistry",
    "ToolUnavailable",
    "build_tool",
    "builtin",
    "default_registry",
    "tool",
    "tool_exception_code",
]

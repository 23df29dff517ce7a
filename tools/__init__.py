"""The tool registry and the built-in tools."""

from tools import builtin
from tools.registry import (
    DuplicateToolError,
    FunctionSchema,
    RegisteredTool,
    ToolArgumentsError,
    ToolRegistry,
    build_tool,
    default_registry,
    describe_function,
    tool,
    validate_arguments,
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
    "FunctionSchema",
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
    "describe_function",
    "tool",
    "tool_exception_code",
    "validate_arguments",
]

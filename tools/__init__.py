"""The tool registry and the built-in tools."""

from tools import builtin
from tools.media_content import Audio, Image
from tools.registry import (
    DuplicateToolError,
    FunctionSchema,
    RegisteredTool,
    ToolArgumentsError,
    ToolRegistry,
    build_tool,
    default_registry,
    describe_function,
    output_schema_of,
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
from tools.tool_result import FAILED_CONTENT, ToolResult, ToolResultError, result_of

__all__ = [
    "FAILED_CONTENT",
    "TOOL_EXCEPTION_CODES",
    "Audio",
    "DuplicateToolError",
    "FunctionSchema",
    "Image",
    "RegisteredTool",
    "ToolArgumentsError",
    "ToolConflict",
    "ToolPermissionDenied",
    "ToolRateLimited",
    "ToolRegistry",
    "ToolResult",
    "ToolResultError",
    "ToolUnavailable",
    "build_tool",
    "builtin",
    "default_registry",
    "describe_function",
    "output_schema_of",
    "result_of",
    "tool",
    "tool_exception_code",
    "validate_arguments",
]

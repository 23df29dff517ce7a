"""The tool registry and the built-in tools.

Importing the package, `tool` or the built-in tools loads the standard library only (a
sandbox's runner imports tool modules on its way to ready); the other names, pydantic's
side of a tool (its schemas, the registry that serves it), load on first use (PEP 562).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tools import builtin
from tools.tool_declaration import tool
from tools.tool_result import FAILED_CONTENT, ToolResult, ToolResultError, result_of

if TYPE_CHECKING:
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

# Where each name loaded on first use lives.
_HOMES = {
    **dict.fromkeys(("Audio", "Image"), "tools.media_content"),
    **dict.fromkeys(
        (
            "DuplicateToolError",
            "FunctionSchema",
            "RegisteredTool",
            "ToolArgumentsError",
            "ToolRegistry",
            "build_tool",
            "default_registry",
            "describe_function",
            "output_schema_of",
            "validate_arguments",
        ),
        "tools.registry",
    ),
    **dict.fromkeys(
        (
            "TOOL_EXCEPTION_CODES",
            "ToolConflict",
            "ToolPermissionDenied",
            "ToolRateLimited",
            "ToolUnavailable",
            "tool_exception_code",
        ),
        "tools.tool_exceptions",
    ),
}
del TYPE_CHECKING  # not a name of the package


def __getattr__(name: str) -> object:
    # protocol.lazy_exports does this too, but importing protocol loads its pydantic models.
    import importlib
    import sys

    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'tools' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    setattr(sys.modules[__name__], name, value)  # looked up once
    return value


def __dir__() -> list[str]:
    return sorted(__all__)


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

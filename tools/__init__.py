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

__all__ = [
    "DuplicateToolError",
    "RegisteredTool",
    "ToolArgumentsError",
    "ToolRegistry",
    "build_tool",
    "builtin",
    "default_registry",
    "tool",
]

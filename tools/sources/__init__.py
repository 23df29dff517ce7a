"""Tool sources: the user's own tools, declared in `conclave.toml` (DESIGN.md, "Tool sources")."""

from tools.sources.config import (
    ConclaveConfig,
    ConfigError,
    McpHttpSource,
    McpStdioSource,
    PythonSource,
    SourceBase,
    ToolSource,
    load_config,
)

__all__ = [
    "ConclaveConfig",
    "ConfigError",
    "McpHttpSource",
    "McpStdioSource",
    "PythonSource",
    "SourceBase",
    "ToolSource",
    "load_config",
]

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
from tools.sources.pip_output import pip_error
from tools.sources.placement import (
    MCP_HTTP_ENTRYPOINT,
    MCP_STDIO_ENTRYPOINT,
    RunsIn,
    runs_in,
    source_of,
)
from tools.sources.python_source import (
    PreparedSource,
    SourceUnavailable,
    pip_install,
    prepare_python_source,
)
from tools.sources.source_loader import DESCRIBE_ENTRYPOINT
from tools.sources.tool_names import (
    DEFAULT_SEPARATOR,
    SERVED_NAME,
    ToolNameError,
    dotted_tool_name,
    served_tool_name,
)

__all__ = [
    "DEFAULT_SEPARATOR",
    "DESCRIBE_ENTRYPOINT",
    "MCP_HTTP_ENTRYPOINT",
    "MCP_STDIO_ENTRYPOINT",
    "SERVED_NAME",
    "ConclaveConfig",
    "ConfigError",
    "McpHttpSource",
    "McpStdioSource",
    "PreparedSource",
    "PythonSource",
    "RunsIn",
    "SourceBase",
    "SourceUnavailable",
    "ToolNameError",
    "ToolSource",
    "dotted_tool_name",
    "load_config",
    "pip_error",
    "pip_install",
    "prepare_python_source",
    "runs_in",
    "served_tool_name",
    "source_of",
]

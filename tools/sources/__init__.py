"""Tool sources: the user's own tools, declared in `conclave.toml` (docs/tools.md).

What the gateway and the sandbox share of them: their configuration, their served names, and
the `python` kind's loader, which the runner imports inside the sandbox (with the layout of a
prepared source's directory). Where each kind's tools run is `tools.calls.Placement`. Each
kind's host-side preparation is the gateway's (`gateway.sources.<kind>.prepare_<kind>`).
"""

from tools.sources.pip_output import pip_error
from tools.sources.source_config import (
    A2aAgentConfig,
    ConclaveConfig,
    ConfigError,
    McpHttpSource,
    McpStdioSource,
    PythonSource,
    SourceBase,
    ToolSource,
    load_config,
)
from tools.sources.source_loader import CODE_DIR, DEPS_DIR, DESCRIBE_ENTRYPOINT, MANIFEST
from tools.sources.tool_names import (
    DEFAULT_SEPARATOR,
    SERVED_NAME,
    ToolNameError,
    dotted_tool_name,
    served_tool_name,
)

__all__ = [
    "CODE_DIR",
    "DEFAULT_SEPARATOR",
    "DEPS_DIR",
    "DESCRIBE_ENTRYPOINT",
    "MANIFEST",
    "SERVED_NAME",
    "A2aAgentConfig",
    "ConclaveConfig",
    "ConfigError",
    "McpHttpSource",
    "McpStdioSource",
    "PythonSource",
    "SourceBase",
    "ToolNameError",
    "ToolSource",
    "dotted_tool_name",
    "load_config",
    "pip_error",
    "served_tool_name",
]

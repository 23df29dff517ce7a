"""Inside the sandbox: import one `python` tool source and serve its tools under its prefix.

The gateway never imports a user's tool code. It prepares, per source, a package directory
(`gateway.sources.python.prepare_python`) whose `__init__` calls `load_source`; the runner
imports that package like any tool module. `load_source` puts the source's code and dependency
directories on `sys.path`, imports the user's module with a registry of its own (so the
source's tool names cannot clash with the built-ins or another source's), and files each tool
in the default registry under its served name (`tools.sources.tool_names`, the separator
from the manifest) with `<source>.<tool>` as its alias, where the runner finds it and
validates the call's arguments against its schema. A source that fails to import is
recorded, not raised:
the sandbox keeps serving every other source. `describe_sources` (run as a call, at the
gateway's start-up) reports each source's tool specs, or why it has none.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import json
import sys
from pathlib import Path
from typing import Any

import tools.registry as registry_module
from tools.registry import DuplicateToolError, ToolRegistry
from tools.sources.tool_names import DEFAULT_SEPARATOR, dotted_tool_name, served_tool_name
from tools.tool_declaration import ToolDeclaration, declaring_into

MANIFEST = "manifest.json"  # {"source": name, "module": module to import, "separator": ...}
CODE_DIR = "code"  # the user's module, file or package, copied here
DEPS_DIR = "deps"  # the source's requirements, installed here (bwrap, process)
DESCRIBE_ENTRYPOINT = "tools.sources.source_loader:describe_sources"

_loaded: dict[str, dict[str, Any]] = {}  # source name -> {"tools": [...]} or {"error": ...}


def load_source(package_dir: str) -> None:
    """Import the source described by `package_dir`'s manifest; record its tools or its error."""
    root = Path(package_dir)
    manifest = json.loads((root / MANIFEST).read_text("utf-8"))
    name, module = str(manifest["source"]), str(manifest["module"])
    separator = str(manifest.get("separator", DEFAULT_SEPARATOR))
    sys.path.insert(0, str(root / CODE_DIR))
    if (root / DEPS_DIR).is_dir():  # after the runtime's own packages: they stay in charge
        sys.path.append(str(root / DEPS_DIR))
    # Its `@tool`s are declared into its own registry, as are tools added to the default one.
    declared: list[ToolDeclaration] = []
    shared, own = registry_module.default_registry, ToolRegistry(declarations=declared)
    registry_module.default_registry = own
    try:
        with declaring_into(declared):
            importlib.import_module(module)
    except BaseException as exc:  # whatever user code raises (SystemExit too) is reported
        _loaded[name] = {"error": f"{module} failed to import: {type(exc).__name__}: {exc}"}
        return
    finally:
        registry_module.default_registry = shared
    specs = []
    for tool in own:
        served = served_tool_name(name, tool.name, separator)
        dotted = dotted_tool_name(name, tool.name)
        qualified = tool.spec.model_copy(update={"name": served})
        aliases = (dotted,) if dotted != served else ()
        # A name claimed twice is reported all the same: the gateway refuses to start,
        # naming both tools.
        with contextlib.suppress(DuplicateToolError):
            shared.add(dataclasses.replace(tool, spec=qualified, aliases=aliases))
        spec = qualified.model_dump(mode="json")
        specs.append({"spec": spec, "entrypoint": tool.entrypoint, "own": tool.name})
    if not specs:
        _loaded[name] = {"error": f"{module} defines no @tool function"}
        return
    _loaded[name] = {"tools": specs}


def describe_sources() -> dict[str, dict[str, Any]]:
    """Every loaded source: its tools (spec and entrypoint), or the error that stopped it."""
    return _loaded

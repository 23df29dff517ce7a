"""What a source's tools are called: `<source><separator><tool>`, fit for a model's API.

OpenAI-compatible model APIs accept function names matching `^[a-zA-Z0-9_-]{1,64}$` only, and
most agent frameworks pass an MCP tool's name through unchanged, so a served name must fit
that rule. A source's tools are served as `<source>__<tool>` by default (`separator` in the
source's table of `conclave.toml` changes it); a character of the tool's own name outside the
rule (an upstream's `files/read`) becomes `_`. The dotted `<source>.<tool>` of earlier
releases stays an alias: a call by it still works, and a `tool:<source>.*` scope still
covers the source's tools, but listings show the served name only.

`served_tool_name` is used by both ends: the gateway, which refuses a name too long at
start-up (`check_served_name`), and the sandbox's source loader, which files each tool under
the same name so the runner finds it. Source names and separators are checked by the config,
so the served name fits the rule unless the separator holds a dot, which opts out of it.
"""

from __future__ import annotations

import re

DEFAULT_SEPARATOR = "__"
SEPARATOR = r"[_.-]{1,3}"  # what `separator` may be
SERVED_NAME = re.compile(r"[a-zA-Z0-9_-]{1,64}")  # model APIs' function-name rule
MAX_NAME = 64
_OUTSIDE = re.compile(r"[^a-zA-Z0-9_-]")


class ToolNameError(ValueError):
    """A served name breaks the rule; the message names the tool and the fix."""


def served_tool_name(source: str, tool: str, separator: str = DEFAULT_SEPARATOR) -> str:
    """The name `source`'s tool `tool` is served under."""
    own = tool if "." in separator else _OUTSIDE.sub("_", tool)
    return f"{source}{separator}{own}"


def dotted_tool_name(source: str, tool: str) -> str:
    """The alias a call may still use: `<source>.<tool>`, as served before."""
    return f"{source}.{tool}"


def check_served_name(name: str, source: str, tool: str) -> str:
    """`name`, or ToolNameError saying which tool of which source and how to fix it."""
    if len(name) > MAX_NAME:
        raise ToolNameError(
            f"tool {tool!r} of source {source!r} would be served as {name!r}, {len(name)}"
            f" characters, past the {MAX_NAME} model APIs accept: give the source a shorter"
            " name (or the tool, where you define it)"
        )
    return name


__all__ = [
    "DEFAULT_SEPARATOR",
    "MAX_NAME",
    "SEPARATOR",
    "SERVED_NAME",
    "ToolNameError",
    "check_served_name",
    "dotted_tool_name",
    "served_tool_name",
]

"""`server/discover` (MCP 2026-07-28): the caller's own view of this gateway.

Answered as a pipeline operation, so it is authenticated, rate limited and audited like a
list: the versions `/mcp` serves (the handshake era's and 2026-07-28), the capabilities, and
in `_meta` the names of the tools this caller may call (`conclave/tools`), the same surface
its `tools/list` shows. The capabilities are the handshake era's less what this wire
delivers only through `subscriptions/listen`, which is not served here yet: list changes and
resource subscriptions (a client would wait on a stream it cannot open). The extensions
served: tasks (`task_methods`).
"""

from __future__ import annotations

from typing import Any

from gateway.http.mcp.catalog import CAPABILITIES, Action
from gateway.http.mcp.task_methods import TASKS_EXTENSION
from gateway.pipeline import RequestContext, allowed_specs
from tools import ToolRegistry

TOOLS_META = "conclave/tools"
_LISTEN_ONLY = ("listChanged", "subscribe")  # what `subscriptions/listen` would deliver
STATELESS_CAPABILITIES: dict[str, Any] = {
    kind: {k: v for k, v in offered.items() if k not in _LISTEN_ONLY}
    for kind, offered in CAPABILITIES.items()
    if kind != "logging"  # `logging/setLevel` is not part of the 2026-07-28 wire
}
STATELESS_CAPABILITIES["extensions"] = {TASKS_EXTENSION: {}}  # `task_methods`


def discover(registry: ToolRegistry, supported: tuple[str, ...]) -> Action:
    """The pipeline action answering `server/discover` for the caller."""

    async def answer(ctx: RequestContext) -> dict[str, Any]:
        names = [spec.name for spec in allowed_specs(registry, ctx)]
        return {
            "supportedVersions": list(supported),
            "capabilities": STATELESS_CAPABILITIES,
            "_meta": {TOOLS_META: names},
        }

    return answer

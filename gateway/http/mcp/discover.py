"""`server/discover` (MCP 2026-07-28): the caller's own view of this gateway.

Answered as a pipeline operation, so it is authenticated, rate limited and audited like a
list: the versions `/mcp` serves (the handshake era's and 2026-07-28), the capabilities, and
in `_meta` the names of the tools this caller may call (`conclave/tools`), the same surface
its `tools/list` shows. The capabilities are the handshake era's: list changes and
resource subscriptions arrive on `subscriptions/listen` (`subscriptions_listen`), log
messages at the level a request's `_meta["io.modelcontextprotocol/logLevel"]` asks for
(`call_stream`). The extensions served: tasks (`task_methods`).
"""

from __future__ import annotations

from typing import Any

from gateway.http.mcp.task_methods import TASKS_EXTENSION
from gateway.mcp_state import CAPABILITIES, Action
from gateway.pipeline import RequestContext, allowed_specs
from tools import ToolRegistry

TOOLS_META = "conclave/tools"
STATELESS_CAPABILITIES: dict[str, Any] = {**CAPABILITIES, "extensions": {TASKS_EXTENSION: {}}}


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

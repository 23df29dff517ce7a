"""The live console at `/console`: server-rendered pages over the gateway's own state (agents,
tools, the audit stream, namespaces, chains, sandboxes), a live feed by server-sent events,
behind the admin key."""

from gateway.http.console.console_headers import ConsoleHeaders
from gateway.http.console.console_routes import router

__all__ = ["ConsoleHeaders", "router"]

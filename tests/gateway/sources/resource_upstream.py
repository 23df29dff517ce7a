"""A FastMCP server playing an `mcp_http` upstream with resources, for the resource tests.

Run as a script (`python resource_upstream.py --port N --label a`), in its own process, with
sessions (news reaches a client on its session's GET stream). Two of them (labels `a` and
`b`) serve the same URIs with different content, so a test can tell whose answer it got:

- resources `notes://readme` ("<label> notes") and `<label>://status` (its read count);
- templates `notes://{topic}/page` (both serve it) and `<label>://items/{id}` (its own);
- reads of the item `gone` answer JSON-RPC -32002 (resource not found, as the MCP spec says)
  and of the item `broken` -32603 (FastMCP's answer when a resource's function raises), as
  does the prompt for the topic `broken`;
- a prompt `ask(topic)`; `completion/complete` suggests `<label>-1`, `<label>-2` for an
  item's `id` and `alpha`, `beta` for the prompt's `topic` (filtered by the typed prefix);
- `resources/subscribe|unsubscribe`, and the tools `touch(uri)` (tells every session
  subscribed to `uri` it was updated; answers how many), `drop(name)` (removes the tool
  `name` and tells every session the tool list changed), `grow(name)` (adds a tool `name`,
  and tells them too), `victim` and `echo`; `subscription_log(uri)` answers the
  `resources/subscribe` and `resources/unsubscribe` it received for `uri`, in order (JSON).
"""

from __future__ import annotations

import argparse
import json
from typing import Any

import uvicorn
from fastmcp import FastMCP
from mcp import types
from mcp.shared.exceptions import MCPError

_RESOURCE_NOT_FOUND = -32002


def build_app(label: str) -> Any:
    server = FastMCP(f"resources-{label}")
    subscribed: dict[str, list[Any]] = {}  # uri -> sessions
    sessions: list[Any] = []
    reads = {"status": 0}
    log: list[tuple[str, str]] = []  # (method, uri) of each (un)subscribe received

    @server.resource("notes://readme", mime_type="text/plain")
    def readme() -> str:
        """The upstream's notes."""
        return f"{label} notes"

    @server.resource(f"{label}://status", mime_type="text/plain")
    def status() -> str:
        """How often it was read."""
        reads["status"] += 1
        return f"{label} status read {reads['status']} times"

    @server.resource("notes://{topic}/page", mime_type="text/plain")
    def page(topic: str) -> str:
        """A page on `topic`."""
        return f"{label} page on {topic}"

    @server.resource(f"{label}://items/{{id}}", mime_type="text/plain")
    def item(id: str) -> str:
        """Item `id`."""
        if id == "gone":
            raise MCPError(_RESOURCE_NOT_FOUND, f"no item {id!r} on {label}")
        if id == "broken":
            raise RuntimeError(f"item {id!r} is broken on purpose")
        return f"{label} item {id}"

    @server.prompt
    def ask(topic: str) -> str:
        """A question on `topic`."""
        if topic == "broken":
            raise RuntimeError(f"topic {topic!r} is broken on purpose")
        return f"Tell me about {topic}."

    @server.tool
    def echo(message: str) -> str:
        """Answer the message."""
        return message

    @server.tool
    def victim() -> str:
        """A tool `drop` can remove."""
        return "still here"

    @server.tool
    async def touch(uri: str) -> int:
        """Tell every session subscribed to `uri` that it was updated."""
        for session in subscribed.get(uri, []):
            await session.send_resource_updated(uri)
        return len(subscribed.get(uri, []))

    @server.tool
    def subscription_log(uri: str) -> str:
        """The resources/subscribe and resources/unsubscribe received for `uri`, in order."""
        return json.dumps([method for method, logged in log if logged == uri])

    @server.tool
    async def drop(name: str) -> str:
        """Remove the tool `name` and tell every session the tool list changed."""
        server.local_provider.remove_tool(name)
        for session in sessions:
            try:
                await session.send_tool_list_changed()
            except Exception:  # a session that went away
                continue
        return f"dropped {name}"

    @server.tool
    async def grow(name: str) -> str:
        """Add a tool `name` and tell every session the tool list changed."""

        def grown() -> str:
            return f"{name} grown"

        server.tool(grown, name=name)
        for session in sessions:
            try:
                await session.send_tool_list_changed()
            except Exception:  # a session that went away
                continue
        return f"grew {name}"

    async def complete(_: Any, params: types.CompleteRequestParams) -> types.CompleteResult:
        typed = params.argument.value
        if isinstance(params.ref, types.PromptReference):
            values = ["alpha", "beta"]
        else:
            values = [f"{label}-1", f"{label}-2"]
        chosen = [v for v in values if v.startswith(typed)]
        return types.CompleteResult(completion=types.Completion(values=chosen, total=len(chosen)))

    async def subscribe(ctx: Any, params: types.SubscribeRequestParams) -> types.EmptyResult:
        log.append(("resources/subscribe", str(params.uri)))
        subscribed.setdefault(str(params.uri), []).append(ctx.session)
        return types.EmptyResult()

    async def unsubscribe(ctx: Any, params: types.UnsubscribeRequestParams) -> types.EmptyResult:
        log.append(("resources/unsubscribe", str(params.uri)))
        held = subscribed.get(str(params.uri), [])
        if ctx.session in held:
            held.remove(ctx.session)
        return types.EmptyResult()

    async def initialized(ctx: Any, _: types.NotificationParams) -> None:
        sessions.append(ctx.session)

    low = server._mcp_server
    low.add_request_handler("completion/complete", types.CompleteRequestParams, complete)
    low.add_request_handler("resources/subscribe", types.SubscribeRequestParams, subscribe)
    low.add_request_handler("resources/unsubscribe", types.UnsubscribeRequestParams, unsubscribe)
    low.add_notification_handler("notifications/initialized", types.NotificationParams, initialized)
    return server.http_app(path="/mcp", json_response=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--label", required=True)
    args = parser.parse_args()
    uvicorn.run(build_app(args.label), host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()

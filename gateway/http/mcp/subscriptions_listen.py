"""`subscriptions/listen` (MCP 2026-07-28): a caller's news on the answer to one POST.

The 2026-07-28 wire's replacement of the GET stream and of `resources/subscribe`
(`docs/specification/2026-07-28/basic/patterns/subscriptions`). The request passes the
pipeline like any message (authenticated, rate limited, audited as
`mcp:subscriptions/listen`); its action (`admit`) decides what the gateway honours of the
filter in `params.notifications`:

- `toolsListChanged`, `promptsListChanged`, `resourcesListChanged`: honoured as asked (the
  MCP sources' list changes the caller sees, as on the GET stream);
- `resourceSubscriptions`: each URI the caller may subscribe to (a resource of an MCP
  source it sees, `mcp_http` or `mcp_stdio`, as `resources/subscribe` rules) is subscribed
  for the identity in Redis (`ResourceSubscriptions`, so an update any replica hears reaches
  the stream; an `mcp_stdio` server is subscribed in the identity's own sandbox); the others
  are left out of the acknowledgment, as the revision says (at most `MAX_SUBSCRIPTIONS` URIs a
  request).

A filter of the wrong shape (`notifications` not an object, a flag not a boolean,
`resourceSubscriptions` not a list of strings, or longer than `MAX_SUBSCRIPTIONS`) is the
revision's Invalid params: HTTP 400 with -32602, as the wire answers bad `_meta`
(`filter_problem`, checked with the wire's other checks before the pipeline runs the
action). A notification type the gateway does not know is no error: the revision omits the
types a server does not support from the acknowledgment, and so does the gateway.

The answer is an SSE stream (`listen_response`), held in `CallerStreams` with the filter as
its `accepts`: first `notifications/subscriptions/acknowledged` with the honoured filter,
then only the notifications the filter names, each carrying the request's id in
`_meta["io.modelcontextprotocol/subscriptionId"]`, and a comment every `KEEPALIVE_S` (at
which the caller's revocation is checked and its subscriptions kept alive for another
`subscriptions.TTL_S`: they end that long after the stream does). The gateway
ends the stream with the JSON-RPC result the revision calls a graceful close (`resultType`
and the subscription id) when the token expires or is revoked, when a newer stream of the
identity takes its place, and when the replica shuts down; a client that closes the
stream ends the subscription.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import aclosing
from typing import Any

from fastapi.responses import StreamingResponse

from gateway.gateway_error import GatewayError
from gateway.http.mcp.listen_stream import kept_alive, sse_message
from gateway.mcp_state import (
    MAX_SUBSCRIPTIONS,
    Accepts,
    Action,
    CallerStreams,
    McpCatalog,
    ResourceSubscriptions,
    sources_for,
)
from gateway.pipeline import RequestContext
from protocol import ErrorCode, Principal

LISTEN_METHOD = "subscriptions/listen"
OPERATION = "mcp:subscriptions/listen"
ACKNOWLEDGED = "notifications/subscriptions/acknowledged"
META_SUBSCRIPTION_ID = "io.modelcontextprotocol/subscriptionId"
UPDATED = "notifications/resources/updated"
# The filter's flags, and the notification each lets through.
LIST_FLAGS = {
    "toolsListChanged": "notifications/tools/list_changed",
    "promptsListChanged": "notifications/prompts/list_changed",
    "resourcesListChanged": "notifications/resources/list_changed",
}
_RESOURCES = "resourceSubscriptions"


def admit(catalog: McpCatalog, params: dict[str, Any]) -> Action:
    """The pipeline action of a `subscriptions/listen` with `params`: the honoured filter."""

    async def answer(ctx: RequestContext) -> dict[str, Any]:
        if (problem := filter_problem(params)) is not None:  # checked by the wire already
            raise GatewayError.of(ErrorCode.INVALID_REQUEST, problem)
        asked: dict[str, Any] = params["notifications"]
        honoured: dict[str, Any] = {flag: True for flag in LIST_FLAGS if asked.get(flag) is True}
        uris = asked.get(_RESOURCES)
        if uris is None:
            return honoured
        principal = ctx.require_principal()
        sources = sources_for(principal, catalog.upstreams, catalog.stdio)
        kept = []
        for uri in dict.fromkeys(uris):
            try:
                await catalog.subscriptions.subscribe(principal, sources, uri)
            except GatewayError:
                continue  # not one this caller can subscribe to: left out of the ack
            kept.append(uri)
        if kept:
            honoured[_RESOURCES] = kept
        return honoured

    return answer


def accepts(honoured: dict[str, Any]) -> Accepts:
    """What a stream with the `honoured` filter takes: the kinds it named, nothing else."""
    methods = {method for flag, method in LIST_FLAGS.items() if honoured.get(flag) is True}
    uris = frozenset(honoured.get(_RESOURCES, ()))

    def taken(message: dict[str, Any]) -> bool:
        method = message.get("method")
        if method == UPDATED:
            params = message.get("params")
            return isinstance(params, dict) and params.get("uri") in uris
        return method in methods

    return taken


def listen_response(
    streams: CallerStreams,
    subscriptions: ResourceSubscriptions,
    principal: Principal,
    rpc_id: Any,
    honoured: dict[str, Any],
) -> StreamingResponse:
    """The subscription's SSE stream, once the pipeline admitted it."""
    headers = {"Cache-Control": "no-store", "X-Accel-Buffering": "no"}
    frames = _frames(streams, subscriptions, principal, rpc_id, honoured)
    return StreamingResponse(frames, media_type="text/event-stream", headers=headers)


async def _frames(
    streams: CallerStreams,
    subscriptions: ResourceSubscriptions,
    principal: Principal,
    rpc_id: Any,
    honoured: dict[str, Any],
) -> AsyncIterator[bytes]:
    tag = {META_SUBSCRIPTION_ID: rpc_id}
    async with streams.opened(principal, accepts(honoured)) as messages:
        ack = {"_meta": tag, "notifications": honoured}
        yield sse_message({"jsonrpc": "2.0", "method": ACKNOWLEDGED, "params": ack})
        frames = kept_alive(
            messages, streams, subscriptions, principal, lambda m: sse_message(_tagged(m, tag))
        )
        async with aclosing(frames):
            async for frame in frames:
                yield frame
    # The revision's graceful close: the client knows the gateway ended it on purpose.
    closed = {"resultType": "complete", "_meta": tag}
    yield sse_message({"jsonrpc": "2.0", "id": rpc_id, "result": closed})


def _tagged(message: dict[str, Any], tag: dict[str, Any]) -> dict[str, Any]:
    """`message` with the subscription's id in its `_meta` (a copy: other streams share it)."""
    params = message.get("params")
    params = dict(params) if isinstance(params, dict) else {}
    meta = params.get("_meta")
    params["_meta"] = {**(meta if isinstance(meta, dict) else {}), **tag}
    return {**message, "params": params}


def filter_problem(params: dict[str, Any]) -> str | None:
    """What is wrong with the shape of a `subscriptions/listen` filter (the revision's
    `SubscriptionFilter`), naming the fix; None when it is well formed. Keys it does not
    know are no problem: they are left out of the acknowledgment."""
    asked = params.get("notifications")
    if not isinstance(asked, dict):
        return "subscriptions/listen needs params.notifications, an object (SubscriptionFilter)"
    for flag in LIST_FLAGS:
        if asked.get(flag) is not None and not isinstance(asked[flag], bool):  # null: absent
            return f"params.notifications.{flag} is a boolean (true to receive those changes)"
    uris = asked.get(_RESOURCES)
    if uris is None:
        return None
    if not isinstance(uris, list) or not all(isinstance(uri, str) for uri in uris):
        return f"params.notifications.{_RESOURCES} is a list of resource URIs (strings)"
    if len(uris) > MAX_SUBSCRIPTIONS:
        return f"at most {MAX_SUBSCRIPTIONS} resource URIs a subscription: listen on fewer"
    return None


__all__ = [
    "ACKNOWLEDGED",
    "LISTEN_METHOD",
    "LIST_FLAGS",
    "META_SUBSCRIPTION_ID",
    "OPERATION",
    "accepts",
    "admit",
    "filter_problem",
    "listen_response",
]

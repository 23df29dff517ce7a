"""`completion/complete` at `/mcp`: argument suggestions, forwarded to the source that owns
the prompt or resource template they are for.

A prompt is named as `prompts/list` serves it (`<source>.<prompt>`, or with the source's
tool separator: `<source>__<prompt>`), a resource template as
`resources/templates/list` serves it (`gateway.mcp_state.resource_uris`); the source is asked
with its own name or template, and its answer goes back unchanged. A source that does not
complete (it did not advertise `completions`) is answered for: no suggestions.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gateway.gateway_error import GatewayError
from gateway.mcp_state.mcp_sources import McpSource, prompt_owner
from gateway.mcp_state.resource_uris import resolve_template
from protocol import ErrorCode

METHOD = "completion/complete"
_NONE: dict[str, Any] = {"completion": {"values": [], "total": 0, "hasMore": False}}
_METHOD_NOT_FOUND = -32601


async def complete(sources: Sequence[McpSource], params: dict[str, Any]) -> dict[str, Any]:
    """The owning source's suggestions for `params` (a `CompleteRequest`'s params)."""
    ref, argument = params.get("ref"), params.get("argument")
    if not isinstance(ref, dict) or not isinstance(argument, dict):
        raise _invalid("completion/complete needs params.ref and params.argument (objects)")
    if ref.get("type") == "ref/prompt":
        name = ref.get("name")
        if not isinstance(name, str):
            raise _invalid("a ref/prompt needs its name (a string)")
        owner = prompt_owner(sources, name)
        if owner is None:
            raise GatewayError.of(
                ErrorCode.NOT_FOUND, f"no prompt {name[:100]!r} here; prompts/list names them"
            )
        source, own = owner
        forwarded = {**ref, "name": own}
    elif ref.get("type") == "ref/resource":
        uri = ref.get("uri")
        if not isinstance(uri, str):
            raise _invalid("a ref/resource needs its uri (a resource template, a string)")
        source, own = resolve_template(sources, uri)
        forwarded = {**ref, "uri": own}
    else:
        raise _invalid("params.ref.type is ref/prompt or ref/resource")
    try:
        return await source.send(METHOD, {**params, "ref": forwarded})
    except GatewayError as exc:
        if exc.error.details.get("rpc_code") == _METHOD_NOT_FOUND:
            return _NONE  # the source offers no completions: none to suggest
        raise


def _invalid(message: str) -> GatewayError:
    return GatewayError.of(ErrorCode.INVALID_REQUEST, message)


__all__ = ["METHOD", "complete"]

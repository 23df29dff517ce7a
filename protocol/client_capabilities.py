"""The client capabilities a gateway passes on to an MCP server on a caller's behalf.

MCP's client features are the requests a server may send its client: sampling
(`sampling/createMessage`), elicitation (`elicitation/create`) and roots (`roots/list`). A
server is told only what the calling client declared, and asks nothing else of it. What a
client declares is kept in one of a few shapes (`FLAGS`: each feature and the sub-fields MCP
defines for it, as empty objects or `true`), so nothing a client made up reaches a server and
the shapes a server sees stay few; `capability_flags` packs a shape into one integer (it
travels in the session id the gateway issues at `initialize`).
"""

from __future__ import annotations

from typing import Any

# The request a server sends for each client feature: what the caller must have declared.
FEATURE_OF_METHOD = {
    "sampling/createMessage": "sampling",
    "elicitation/create": "elicitation",
    "roots/list": "roots",
}
# Each flag a path into the capabilities object; a path ending in one of `_BOOLEANS` is `true`
# when set, any other an object.
FLAGS: tuple[tuple[str, ...], ...] = (
    ("sampling",),
    ("sampling", "context"),
    ("sampling", "tools"),
    ("elicitation",),
    ("elicitation", "form"),
    ("elicitation", "url"),
    ("elicitation", "form", "applyDefaults"),
    ("roots",),
    ("roots", "listChanged"),
)
_BOOLEANS = frozenset({"applyDefaults", "listChanged"})


def capability_flags(declared: object) -> int:
    """The flags of what `declared` (a client's `capabilities`) says of the client features."""
    flags = 0
    for bit, path in enumerate(FLAGS):
        node: object = declared
        for key in path:
            node = node.get(key) if isinstance(node, dict) else None
        if node is True if path[-1] in _BOOLEANS else isinstance(node, dict):
            flags |= 1 << bit
    return flags


def capabilities_of_flags(flags: int) -> dict[str, Any]:
    """The capabilities object `flags` stand for (a flag whose parent is unset is ignored)."""
    capabilities: dict[str, Any] = {}
    for bit, path in enumerate(FLAGS):
        if not flags & (1 << bit):
            continue
        node = capabilities
        for key in path[:-1]:
            child = node.get(key)
            if not isinstance(child, dict):
                break
            node = child
        else:
            node[path[-1]] = True if path[-1] in _BOOLEANS else {}
    return capabilities


def client_capabilities(declared: object) -> dict[str, Any]:
    """What a server may be told of `declared`: the client features, in a kept shape."""
    return capabilities_of_flags(capability_flags(declared))


__all__ = [
    "FEATURE_OF_METHOD",
    "FLAGS",
    "capabilities_of_flags",
    "capability_flags",
    "client_capabilities",
]

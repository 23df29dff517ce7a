"""A remote agent's card as the gateway serves it: the agent's own description, skills and
capabilities, with the gateway's interfaces and authentication in place of the agent's.

The interfaces are the gateway's URLs for the bindings the agent serves (JSON-RPC at
`/a2a/{name}`, HTTP+JSON at `/a2a/{name}/rest`; gRPC is not served through the gateway), and
the card asks for the gateway's bearer token (`securitySchemes`, `securityRequirements`). The
agent's own signatures are dropped: they sign the card it published, not this one.
"""

from __future__ import annotations

from typing import Any

from gateway.a2a.remote_agents import HTTP_JSON, JSONRPC

BEARER_SCHEME = "conclave_bearer"
_BINDING_PATH = {JSONRPC: "", HTTP_JSON: "/rest"}


def agent_path(name: str) -> str:
    return f"/a2a/{name}"


def gateway_card(upstream: dict[str, Any], origin: str, name: str) -> dict[str, Any]:
    """`upstream` (the agent's card) as served by the gateway reached at `origin`."""
    interfaces: list[dict[str, Any]] = []
    for declared in upstream.get("supportedInterfaces", []):
        binding = declared.get("protocolBinding") if isinstance(declared, dict) else None
        if binding in _BINDING_PATH and all(i["protocolBinding"] != binding for i in interfaces):
            interfaces.append(
                {
                    "url": origin + agent_path(name) + _BINDING_PATH[binding],
                    "protocolBinding": binding,
                    "protocolVersion": declared.get("protocolVersion", "1.0"),
                }
            )
    card = {k: v for k, v in upstream.items() if k != "signatures"}
    card["supportedInterfaces"] = interfaces
    card["securitySchemes"] = {
        BEARER_SCHEME: {
            "httpAuthSecurityScheme": {
                "description": "The agent token Conclave issued the caller",
                "scheme": "Bearer",
                "bearerFormat": "JWT",
            }
        }
    }
    card["securityRequirements"] = [{"schemes": {BEARER_SCHEME: {"list": []}}}]
    return card

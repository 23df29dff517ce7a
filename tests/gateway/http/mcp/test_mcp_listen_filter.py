"""A `subscriptions/listen` whose filter has the wrong shape is the 2026-07-28 revision's
Invalid params, answered as the wire answers bad `_meta`: HTTP 400 with -32602 (and the
SERF envelope in `error.data`), before any stream opens."""

from __future__ import annotations

from typing import Any

import anyio
import httpx
import pytest

from gateway.config import Settings
from gateway.identity.tokens import issue_token

pytestmark = pytest.mark.anyio

VERSION = "2026-07-28"
META = {
    "io.modelcontextprotocol/protocolVersion": VERSION,
    "io.modelcontextprotocol/clientCapabilities": {},
}


def _listen(settings: Settings, notifications: Any) -> tuple[dict[str, Any], dict[str, str]]:
    token = issue_token(settings, tenant="t", agent="listener", scopes=["tool:*"])
    headers = {
        "Authorization": f"Bearer {token}",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": VERSION,
        "Mcp-Method": "subscriptions/listen",
    }
    params = {"_meta": META, "notifications": notifications}
    body = {"jsonrpc": "2.0", "id": 9, "method": "subscriptions/listen", "params": params}
    return body, headers


@pytest.mark.parametrize(
    "notifications",
    [
        None,
        ["toolsListChanged"],
        {"toolsListChanged": "yes"},
        {"resourceSubscriptions": "notes://readme"},
        {"resourceSubscriptions": [1, 2]},
        {"resourceSubscriptions": [f"a://{n}" for n in range(101)]},
    ],
    ids=["absent", "a-list", "flag-not-boolean", "uris-not-a-list", "uris-not-strings", "101"],
)
async def test_a_filter_of_the_wrong_shape_is_invalid_params_with_400(
    client: httpx.AsyncClient, settings: Settings, notifications: Any
) -> None:
    body, headers = _listen(settings, notifications)
    with anyio.fail_after(10):  # a filter taken as good opens a stream that does not end
        answer = await client.post("/mcp", json=body, headers=headers)
    assert answer.status_code == 400, answer.text
    assert answer.headers["content-type"].startswith("application/json")
    error = answer.json()["error"]
    assert answer.json()["id"] == 9
    assert error["code"] == -32602, error
    assert "notifications" in error["message"] or "resource URIs" in error["message"]
    assert error["data"]["code"] == "INVALID_REQUEST"  # the SERF envelope, as on every refusal

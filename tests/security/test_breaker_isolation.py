"""One tenant cannot shut a tool for another: breakers count only the tool's own faults, and
each tenant has its own.

On bwrap and docker. Before: five `read_file` calls of a missing file by one tenant opened the
tool's one breaker, and every tenant's `read_file` was refused UPSTREAM_UNAVAILABLE.
"""

from __future__ import annotations

import pytest

from tests.security.conftest import SandboxedGateway

pytestmark = pytest.mark.anyio


async def _call(
    gateway: SandboxedGateway, tenant: str, agent: str, tool: str, **arguments: object
) -> tuple[int, dict[str, object]]:
    answer = await gateway.client.post(
        f"/v1/tools/{tool}/call",
        json={"arguments": arguments},
        headers=gateway.bearer(tenant, agent),
    )
    return answer.status_code, answer.json()


async def test_a_callers_mistakes_never_open_the_tools_breaker(
    sandboxed_gateway: SandboxedGateway,
) -> None:
    gateway = sandboxed_gateway
    for _ in range(7):  # past the breaker's five failures in a row
        status, body = await _call(gateway, "evil", "mallory", "read_file", path="missing.txt")
        assert (status, body["code"]) == (404, "NOT_FOUND")
    for _ in range(6):  # a path outside the workspace: a refused permission, not a fault
        status, body = await _call(gateway, "evil", "mallory", "read_file", path="../../x")
        assert body["code"] == "PERMISSION_DENIED"
    for _ in range(6):  # bad arguments: refused before the tool ran
        status, body = await _call(gateway, "evil", "mallory", "read_file", nope=1)
        assert body["code"] == "INVALID_ARGUMENTS"
    # The tool is healthy, for the attacker and for everyone else.
    status, body = await _call(gateway, "acme", "alice", "write_file", path="a.txt", content="x")
    assert status == 200, body
    status, body = await _call(gateway, "acme", "alice", "read_file", path="a.txt")
    assert (status, body.get("result")) == (200, "x"), body
    status, body = await _call(gateway, "evil", "mallory", "read_file", path="missing.txt")
    assert body["code"] == "NOT_FOUND"


async def test_a_tool_failing_for_one_tenant_opens_that_tenants_breaker_only(
    sandboxed_gateway: SandboxedGateway,
) -> None:
    gateway = sandboxed_gateway
    for _ in range(5):
        status, body = await _call(gateway, "evil", "mallory", "fail", message="boom")
        assert body["code"] == "TOOL_FAILED"
    status, body = await _call(gateway, "evil", "mallory", "fail", message="boom")
    assert (status, body["code"]) == (503, "UPSTREAM_UNAVAILABLE")  # the attacker's is open
    # Another tenant's calls of the same tool still run (and fail on their own account).
    for _ in range(3):
        status, body = await _call(gateway, "acme", "alice", "fail", message="mine")
        assert body["code"] == "TOOL_FAILED" and "mine" in str(body["message"])
    latency = await gateway.client.get(
        "/v1/tools/fail/latency", headers=gateway.bearer("acme", "alice")
    )
    assert latency.json()["breaker"] == "closed"

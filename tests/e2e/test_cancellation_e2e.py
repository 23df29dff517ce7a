"""Work nobody waits for stops: a cancelled or abandoned call's processes are gone at once.

Over real HTTP against the gateway under uvicorn, on each sandbox backend: a `run_shell` call
sleeping 25 s is cancelled by `notifications/cancelled` (raw, and from the official `mcp`
client), or abandoned by a REST or an MCP client closing its connection. Each time the
call's processes (found on this machine by a unique marker in their command line: every
backend's processes are visible here) are gone within a bounded wait, the agent's next call
runs in the same sandbox, still warm, and the audit records the call as cancelled. A cancel
from another tenant naming the same request id cancels nothing.
"""

from __future__ import annotations

import random
import time
import uuid
from collections.abc import Callable
from typing import Any

import anyio
import httpx
import httpx2
import pytest
from mcp.client.client import Client
from mcp.client.streamable_http import streamable_http_client

from conclave.bench.core import processes_with
from conclave.stack import EmbeddedStack

# serial: timing-bound (a cancelled call's sandbox must settle before the next call), so
# .ci/test runs it alone after the parallel pass.
pytestmark = [pytest.mark.anyio, pytest.mark.serial]

GONE_WITHIN_S = 5.0  # the bound of the waits; the bench measures the real latency (ms)
WARM_WITHIN_S = 1.0  # a warm call answers in milliseconds; a cold docker start takes longer


def _marker() -> str:
    """A sleep of 25 s whose argument no other process on this machine has."""
    return f"25.{random.randrange(10**9):09d}"


def _running(marker: str) -> list[int]:
    return processes_with(marker)


async def _wait_until(check: Callable[[], bool], within_s: float, what: str) -> float:
    """Seconds until `check()` held, polled every few ms; fails after `within_s`."""
    began = time.monotonic()
    while not check():
        if time.monotonic() - began > within_s:
            raise AssertionError(f"{what}: not within {within_s} s")
        await anyio.sleep(0.005)
    return time.monotonic() - began


async def _started(marker: str) -> None:
    await _wait_until(lambda: bool(_running(marker)), 30, "the call's process started")


async def _gone(marker: str) -> float:
    return await _wait_until(
        lambda: not _running(marker), GONE_WITHIN_S, "the call's processes gone"
    )


def _auth(stack: EmbeddedStack, agent: str, tenant: str = "acme") -> dict[str, str]:
    return {"Authorization": f"Bearer {stack.token(tenant, agent, ['tool:run_shell'])}"}


def _sleep_call(request_id: str, marker: str) -> dict[str, Any]:
    arguments = {"command": f"sleep {marker}"}
    params = {"name": "run_shell", "arguments": arguments}
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}


def _cancel_notice(request_id: str) -> dict[str, Any]:
    params = {"requestId": request_id, "reason": "the user pressed stop"}
    return {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": params}


async def _warm_sandbox(http: httpx.AsyncClient, headers: dict[str, str]) -> str:
    """The agent's sandbox after a quick call (started now if it was not): its label."""
    began = time.monotonic()
    answer = await http.post(
        "/v1/tools/run_shell/call", json={"arguments": {"command": "true"}}, headers=headers
    )
    assert answer.status_code == 200, answer.text
    label: str = answer.json()["usage"]["sandbox"]
    return label if time.monotonic() - began < WARM_WITHIN_S else await _warm_sandbox(http, headers)


async def _next_call_is_warm(http: httpx.AsyncClient, headers: dict[str, str], label: str) -> None:
    began = time.monotonic()
    answer = await http.post(
        "/v1/tools/run_shell/call", json={"arguments": {"command": "echo back"}}, headers=headers
    )
    took = time.monotonic() - began
    assert answer.status_code == 200, answer.text
    assert answer.json()["result"]["stdout"] == "back\n"
    assert answer.json()["usage"]["sandbox"] == label  # the same sandbox: not recycled
    assert took < WARM_WITHIN_S, f"the next call took {took:.3f} s"


async def _audited_cancelled(stack: EmbeddedStack, agent: str) -> dict[str, Any]:
    async with httpx.AsyncClient(base_url=stack.url, timeout=30) as http:
        audit = await http.get(
            "/v1/audit", params={"agent": agent, "code": "CANCELLED"}, headers=stack.admin_headers
        )
    records = [r for r in audit.json() if r["tool"] == "run_shell"]
    assert len(records) == 1, audit.json()
    record: dict[str, Any] = records[0]
    assert record["outcome"] == "cancelled" and record["stage"] == "dispatch"
    assert record["usage"]["exit_reason"] == "cancelled"
    return record


async def test_notifications_cancelled_stops_the_call_and_its_answer_says_so(
    stack: EmbeddedStack,
) -> None:
    agent = f"c{uuid.uuid4().hex[:8]}"
    headers = _auth(stack, agent)
    marker = _marker()
    answers: list[httpx.Response] = []
    async with httpx.AsyncClient(base_url=stack.url, headers=headers, timeout=60) as http:
        label = await _warm_sandbox(http, headers)

        async def call() -> None:
            answers.append(await http.post("/mcp", json=_sleep_call("call-1", marker)))

        async with anyio.create_task_group() as group:
            group.start_soon(call)
            await _started(marker)
            notice = await http.post("/mcp", json=_cancel_notice("call-1"))
            assert notice.status_code == 202, notice.text
            await _gone(marker)
        # The call's own POST, still open, was answered: a tool error saying it was cancelled.
        result = answers[0].json()["result"]
        assert result["isError"] is True
        assert result["_meta"]["conclave/error"]["code"] == "CANCELLED"
        await _next_call_is_warm(http, headers, label)
    await _audited_cancelled(stack, agent)


async def test_the_mcp_clients_own_cancel_stops_the_call(stack: EmbeddedStack) -> None:
    agent = f"m{uuid.uuid4().hex[:8]}"
    headers = _auth(stack, agent)
    marker = _marker()
    async with httpx.AsyncClient(base_url=stack.url, headers=headers, timeout=60) as http:
        label = await _warm_sandbox(http, headers)
        mcp_http = httpx2.AsyncClient(headers=headers, timeout=60)
        transport = streamable_http_client(f"{stack.url}/mcp", http_client=mcp_http)
        async with mcp_http, Client(transport) as mcp:

            async def call() -> None:
                await mcp.call_tool("run_shell", {"command": f"sleep {marker}"})

            async with anyio.create_task_group() as group:
                group.start_soon(call)
                await _started(marker)
                group.cancel_scope.cancel()  # the client abandons the call, as a user's stop
            await _gone(marker)
            # The session goes on: the next call, in the same sandbox (still warm).
            again = await mcp.call_tool("run_shell", {"command": "echo again"})
            assert not again.is_error, again
            assert again.structured_content == {"stdout": "again\n", "stderr": "", "exit_code": 0}
            assert again.meta is not None and again.meta["conclave/usage"]["sandbox"] == label
        await _next_call_is_warm(http, headers, label)
    await _audited_cancelled(stack, agent)


@pytest.mark.parametrize("route", ["rest", "mcp"])
async def test_a_client_that_closes_its_connection_stops_its_call(
    stack: EmbeddedStack, route: str
) -> None:
    agent = f"d{uuid.uuid4().hex[:8]}"
    headers = _auth(stack, agent)
    marker = _marker()
    async with httpx.AsyncClient(base_url=stack.url, headers=headers, timeout=60) as http:
        label = await _warm_sandbox(http, headers)
        async with httpx.AsyncClient(base_url=stack.url, headers=headers, timeout=60) as leaving:
            if route == "rest":
                body = {"arguments": {"command": f"sleep {marker}"}}
                request = leaving.build_request("POST", "/v1/tools/run_shell/call", json=body)
            else:
                request = leaving.build_request("POST", "/mcp", json=_sleep_call("gone-1", marker))

            async with anyio.create_task_group() as group:
                group.start_soon(leaving.send, request)
                await _started(marker)
                group.cancel_scope.cancel()  # httpx closes the connection of a cancelled send
            await _gone(marker)
        await _next_call_is_warm(http, headers, label)
    await _audited_cancelled(stack, agent)


async def test_a_cancel_from_another_tenant_with_the_same_request_id_cancels_nothing(
    stack: EmbeddedStack,
) -> None:
    agent = f"t{uuid.uuid4().hex[:8]}"
    owner = _auth(stack, agent, tenant="acme")
    stranger = _auth(stack, agent, tenant="globex")  # the same agent name, another tenant
    kept, probe = _marker(), _marker()
    async with httpx.AsyncClient(base_url=stack.url, timeout=60) as http:

        async def call(request_id: str, marker: str) -> None:
            await http.post("/mcp", json=_sleep_call(request_id, marker), headers=owner)

        async with anyio.create_task_group() as group:
            group.start_soon(call, "shared-id", kept)
            group.start_soon(call, "probe-id", probe)
            await _started(kept)
            await _started(probe)
            refused = await http.post("/mcp", json=_cancel_notice("shared-id"), headers=stranger)
            assert refused.status_code == 202  # a notification: nothing to say either way
            # Cancels travel one channel, in order: once the owner's own later cancel of its
            # probe call has taken effect, the stranger's earlier one was seen and ignored.
            await http.post("/mcp", json=_cancel_notice("probe-id"), headers=owner)
            await _gone(probe)
            assert _running(kept), "another tenant's cancel stopped the call"
            await http.post("/mcp", json=_cancel_notice("shared-id"), headers=owner)
            await _gone(kept)


INSTANCE = "x-conclave-instance"


async def _ping_instance(http: httpx.AsyncClient) -> str:
    ping = await http.post("/mcp", json={"jsonrpc": "2.0", "id": "p", "method": "ping"})
    assert ping.status_code == 200, ping.text
    return ping.headers[INSTANCE]


async def test_a_cancel_received_by_another_replica_stops_the_call(
    stack: EmbeddedStack,
) -> None:
    """`--workers 2` on one port: the call runs on one gateway process, its cancel reaches
    the other (each connection's process is named in every answer), and the call stops."""
    settings = stack.settings.model_copy(update={"port": 0, "workers": 2})
    agent = f"r{uuid.uuid4().hex[:8]}"
    marker = _marker()
    with EmbeddedStack(settings) as replicas:
        headers = _auth(replicas, agent)
        async with httpx.AsyncClient(base_url=replicas.url, headers=headers, timeout=60) as http:
            runs_on = await _ping_instance(http)  # the call goes on this same connection

            async def call() -> None:
                await http.post("/mcp", json=_sleep_call("far-1", marker))

            async with anyio.create_task_group() as group:
                group.start_soon(call)
                await _started(marker)
                for _ in range(50):  # a new connection until the other process accepts one
                    async with httpx.AsyncClient(
                        base_url=replicas.url, headers=headers, timeout=60
                    ) as other:
                        if await _ping_instance(other) != runs_on:
                            notice = await other.post("/mcp", json=_cancel_notice("far-1"))
                            assert notice.headers[INSTANCE] != runs_on
                            break
                else:
                    raise AssertionError(f"every connection went to {runs_on}")
                await _gone(marker)

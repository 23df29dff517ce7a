"""Each SERF action, produced by the real gateway over HTTP, followed by the SDK's policy.

The client's own transient retry is turned off, so every recovery seen here is the
`RecoveryPolicy`'s, decided from `action` alone. `retry_same` is produced by no code in the
table (every retryable failure waits), so it is covered by the policy's unit tests only.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any

import pytest

from agents import GatewayCallError, GatewayClient, RecoveryFailed, RecoveryHooks, RecoveryPolicy
from agents.recovery import RecoveryStep
from conclave.stack import EmbeddedStack
from gateway.config import Settings
from gateway.identity.tokens import issue_token
from protocol.serf import SerfError
from protocol.state import CommitRequest, NamespaceConfig, NamespaceMode, Write
from protocol.tools import ToolCallResult

pytestmark = pytest.mark.anyio

Op = Callable[[], Awaitable[Any]]
FAULT_TOOLS = ("flaky", "rate_limited", "strict_args", "broken", "forbidden", "version_of")
SCOPES = ["tool:echo", "tool:versioned_put", "state:serf-*:write"]
SCOPES += [f"tool:{name}" for name in FAULT_TOOLS]


@pytest.fixture(scope="module")
def stack(redis_url: str, sandbox_backend: str) -> Iterator[EmbeddedStack]:
    settings = Settings(
        redis_url=redis_url,
        port=0,
        sandbox_backend=sandbox_backend,
        tool_modules=("tools.builtin", "tools.harness.faults"),
    )
    with EmbeddedStack(settings) as running:
        yield running


def _no_retry(error: SerfError, attempt: int) -> None:
    return None


@pytest.fixture
async def agent(stack: EmbeddedStack) -> AsyncIterator[GatewayClient]:
    token = stack.token("acme", f"a{uuid.uuid4().hex[:10]}", SCOPES)
    async with GatewayClient(stack.url, token, retry=_no_retry) as client:
        yield client


def _tool(client: GatewayClient, name: str, **arguments: Any) -> Op:
    async def call() -> ToolCallResult:
        return await client.call_tool(name, arguments)

    return call


async def _recover(op: Op, hooks: RecoveryHooks[Any] | None = None) -> tuple[Any, list[str]]:
    trace: list[RecoveryStep] = []
    result = await RecoveryPolicy(seed=3).run(op, hooks, trace=trace)
    return result, [step.action.value for step in trace]


async def test_retry_backoff_on_a_flaky_upstream(agent: GatewayClient) -> None:
    result, actions = await _recover(_tool(agent, "flaky", key=uuid.uuid4().hex, failures=2))
    assert result.result == 3 and actions == ["retry_backoff", "retry_backoff"]


async def test_retry_backoff_waits_out_a_rate_limit(agent: GatewayClient) -> None:
    key = uuid.uuid4().hex
    # A 300 ms window: the next call must land inside it to be refused (with 200 ms, CI's load
    # once let it land after, and it was answered at once), and the policy's backoffs (from
    # 50 ms, doubling) outlast it within its five attempts.
    await agent.call_tool("rate_limited", {"key": key, "limit": 1, "window_ms": 300})
    began = time.monotonic()
    op = _tool(agent, "rate_limited", key=key, limit=1, window_ms=300)
    result, actions = await _recover(op)
    assert result.result == 1 and actions[0] == "retry_backoff"
    assert time.monotonic() - began >= 0.2  # waited at least retry_after_ms


async def test_reread_and_retry_on_a_conflict(agent: GatewayClient) -> None:
    key = uuid.uuid4().hex
    for version in range(2):  # another writer moved the value on
        await agent.call_tool("versioned_put", {"key": key, "expected_version": version})

    async def reread(error: SerfError) -> Op:
        current = (await agent.call_tool("version_of", {"key": key})).result
        return _tool(agent, "versioned_put", key=key, expected_version=current)

    op = _tool(agent, "versioned_put", key=key, expected_version=0)
    result, actions = await _recover(op, RecoveryHooks(reread=reread))
    assert result.result == 3 and actions == ["reread_and_retry"]


async def test_fix_args_gets_the_param_hints(agent: GatewayClient) -> None:
    hints: list[dict[str, str]] = []

    async def fix(error: SerfError) -> Op:
        hints.append(error.param_hints)
        return _tool(agent, "strict_args", count=1)

    result, actions = await _recover(
        _tool(agent, "strict_args", count=0), RecoveryHooks(fix_args=fix)
    )
    assert result.result == "1 ms" and actions == ["fix_args"] and "count" in hints[0]


async def test_switch_tool_when_a_tool_is_not_allowed(agent: GatewayClient) -> None:
    async def switch(error: SerfError) -> Op:
        return _tool(agent, "echo", message="via echo")

    op = _tool(agent, "run_shell", command="true")
    result, actions = await _recover(op, RecoveryHooks(switch_tool=switch))
    assert result.result == "via echo" and actions == ["switch_tool"]


async def test_reauth_when_the_token_expired(stack: EmbeddedStack) -> None:
    agent = f"a{uuid.uuid4().hex[:10]}"
    stale = issue_token(stack.settings, tenant="acme", agent=agent, scopes=SCOPES, ttl_s=1, now=1e9)
    clients = [GatewayClient(stack.url, stale, retry=_no_retry)]

    async def reauth(error: SerfError) -> None:
        clients.append(GatewayClient(stack.url, stack.token("acme", agent, SCOPES)))

    async def call() -> ToolCallResult:
        return await clients[-1].call_tool("echo", {"message": "again"})

    try:
        result, actions = await _recover(call, RecoveryHooks(reauth=reauth))
    finally:
        for client in clients:
            await client.aclose()
    assert result.result == "again" and actions == ["reauth"]


async def test_reacquire_a_lease_before_writing_an_owned_key(agent: GatewayClient) -> None:
    namespace = f"serf-{uuid.uuid4().hex[:8]}"
    await agent.create_namespace(namespace, NamespaceConfig(mode=NamespaceMode.OWNED))
    fencing: list[int] = []

    async def commit() -> Any:
        write = Write(key="k", value=1, fencing_token=fencing[-1] if fencing else None)
        return await agent.commit(namespace, CommitRequest(writes=[write]))

    async def reacquire(error: SerfError) -> None:
        grants = await agent.acquire(namespace, ["k"])
        fencing.append(grants.leases[0].fencing_token)

    result, actions = await _recover(commit, RecoveryHooks(reacquire=reacquire))
    assert result.versions == {"k": 1} and actions == ["reacquire"]


async def test_replan_after_a_tool_failure(agent: GatewayClient) -> None:
    async def replan(error: SerfError) -> Op:
        return _tool(agent, "echo", message="plan b")

    result, actions = await _recover(_tool(agent, "broken"), RecoveryHooks(replan=replan))
    assert result.result == "plan b" and actions == ["replan"]


async def test_abort_makes_exactly_one_call(agent: GatewayClient) -> None:
    calls = 0

    async def forbidden() -> Any:
        nonlocal calls
        calls += 1
        return await agent.call_tool("forbidden", {"path": "/etc/shadow"})

    with pytest.raises(RecoveryFailed) as failed:
        await _recover(forbidden)
    assert calls == 1 and failed.value.serf.code == "PERMISSION_DENIED"
    assert isinstance(failed.value, GatewayCallError)

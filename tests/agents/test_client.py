"""GatewayClient against the real gateway: identity, tools, state, leases, SERF errors."""

from __future__ import annotations

import pytest

from agents import GatewayCallError, GatewayClient, StateConflict
from protocol.agents import AgentRegistration
from protocol.serf import ErrorCode, RecoveryAction
from protocol.state import CommitRequest, NamespaceConfig, NamespaceMode, Write

pytestmark = pytest.mark.anyio


async def _agent(admin: GatewayClient, name: str, **rights: object) -> GatewayClient:
    token = await admin.register_agent(AgentRegistration(tenant="acme", agent=name, **rights))
    return admin.for_token(token.token)


async def test_an_agent_sees_and_calls_only_its_tools(admin: GatewayClient) -> None:
    async with await _agent(admin, "writer", tools=["echo"]) as writer:
        assert [spec.name for spec in await writer.list_tools()] == ["echo"]
        result = await writer.call_tool("echo", {"message": "hi"})
        assert result.result == "hi" and result.usage.wall_ms >= 0
        with pytest.raises(GatewayCallError) as refused:
            await writer.call_tool("run_python", {"code": "1"})
    assert refused.value.code is ErrorCode.TOOL_NOT_ALLOWED
    assert refused.value.action is RecoveryAction.SWITCH_TOOL


async def test_bad_arguments_come_back_with_hints(admin: GatewayClient) -> None:
    async with await _agent(admin, "sloppy", tools=["echo"]) as sloppy:
        with pytest.raises(GatewayCallError) as refused:
            await sloppy.call_tool("echo", {"text": "wrong name"})
    assert refused.value.code is ErrorCode.INVALID_ARGUMENTS
    assert "message" in refused.value.serf.param_hints


async def test_a_stale_commit_is_a_conflict_naming_the_key(admin: GatewayClient) -> None:
    async with (
        await _agent(admin, "alice", namespaces={"ledger": "write"}) as alice,
        await _agent(admin, "bob", namespaces={"ledger": "write"}) as bob,
    ):
        await alice.create_namespace("ledger", NamespaceConfig())
        assert (await alice.read("ledger", "total")).version == 0
        seen = await bob.read("ledger", "total")
        await alice.commit("ledger", CommitRequest(writes=[Write(key="total", value=5)]))
        with pytest.raises(StateConflict) as conflict:
            await bob.commit(
                "ledger",
                CommitRequest(
                    writes=[Write(key="total", value=7, expected_version=seen.version)],
                    read_set={"total": seen.version},
                ),
            )
        assert (await bob.read("ledger", "total")).value == 5
        history = await alice.history("ledger")
    assert conflict.value.code is ErrorCode.STATE_CONFLICT
    assert conflict.value.action is RecoveryAction.REREAD_AND_RETRY
    assert [(e.agent, e.keys) for e in history] == [("alice", {"total": (0, 1)})]


async def test_an_owned_key_needs_its_lease(admin: GatewayClient) -> None:
    async with (
        await _agent(admin, "owner", namespaces={"docs": "write"}) as owner,
        await _agent(admin, "other", namespaces={"docs": "write"}) as other,
    ):
        await owner.create_namespace("docs", NamespaceConfig(mode=NamespaceMode.OWNED))
        grants = await owner.acquire("docs", ["intro"], ttl_ms=5_000)
        fencing = grants.leases[0].fencing_token
        with pytest.raises(StateConflict) as held:
            await other.acquire("docs", ["intro"])
        write = Write(key="intro", value="hello", fencing_token=fencing)
        committed = await owner.commit("docs", CommitRequest(writes=[write]))
        await owner.release("docs", "intro")
        assert (await other.acquire("docs", ["intro"])).leases[0].fencing_token > fencing
    assert held.value.code is ErrorCode.LEASE_HELD
    assert committed.versions == {"intro": 1}

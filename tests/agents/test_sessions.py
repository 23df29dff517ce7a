"""Each `Agent.run` works in a fresh session, unless it is given one to keep."""

from __future__ import annotations

from typing import Any

import pytest

from agents import Agent, GatewayClient, ScriptedCall, ScriptedModel, shared_tools
from protocol import CommitRequest, NamespaceConfig, Write

pytestmark = pytest.mark.anyio


def reader_then_writer() -> Agent:
    """Task 1 reads `x`; task 2 writes the unrelated key `y`."""
    model = ScriptedModel(
        [
            [ScriptedCall("shared_read", {"key": "x"})],
            "read it",
            [ScriptedCall("shared_update", {"key": "y", "value": 1, "version": 0})],
            "wrote it",
        ]
    )
    return Agent(
        "probe", "Work.", model, namespaces={"ns": "write"}, local_tools=shared_tools("ns")
    )


async def two_tasks_with_x_changed_between(
    admin: GatewayClient, agent: Agent, session: str | None
) -> tuple[dict[str, Any], list[str], list[str | None]]:
    """Run both tasks; another agent writes `x` between them. The second write's result,
    the sessions of the namespace's commits, and each run's session."""
    other = Agent("other", "Write.", ScriptedModel([]), namespaces={"ns": "write"})
    await agent.register(admin)
    client = await other.register(admin)
    await client.create_namespace("ns", NamespaceConfig())
    first = await agent.run("look at x", session=session)
    await client.commit("ns", CommitRequest(writes=[Write(key="x", value="changed")]))
    second = await agent.run("set y", session=session)
    history = await client.history("ns")
    await agent.aclose()
    await other.aclose()
    written = second.calls[0].result
    assert isinstance(written, dict)
    return (
        written,
        [e.session for e in history if e.agent == "probe"],
        [first.session, second.session],
    )


async def test_a_read_from_an_earlier_task_does_not_block_a_later_tasks_write(
    admin: GatewayClient,
) -> None:
    written, commit_sessions, run_sessions = await two_tasks_with_x_changed_between(
        admin, reader_then_writer(), None
    )
    assert written["committed"] is True
    assert run_sessions[0] != run_sessions[1]
    assert commit_sessions == [run_sessions[1]]


async def test_a_kept_session_validates_the_earlier_tasks_reads_too(admin: GatewayClient) -> None:
    written, commit_sessions, run_sessions = await two_tasks_with_x_changed_between(
        admin, reader_then_writer(), "planning-1"
    )
    # y was never read, but x (read in task 1 of the same session) changed: nothing written
    assert written["committed"] is False
    assert list(written["stale"]) == ["x"]
    assert run_sessions == ["planning-1", "planning-1"]
    assert commit_sessions == []

"""The tasks extension (`io.modelcontextprotocol/tasks`) for the official `mcp` 2.x client.

The SDK ships the extension mechanism (`mcp.client.extension`: a capability ad, a claim on
`tools/call`'s `resultType: "task"`) but not the tasks extension itself; this is it, as the
extension's text (ext-tasks, `specification/draft/tasks.md`) describes a client: declare it,
accept a `CreateTaskResult`, poll `tasks/get` (with `Mcp-Name: <taskId>`) at the
`pollIntervalMs` asked, return the task's `CallToolResult`. `tasks/cancel` and `tasks/get`
are here for tests that drive a task themselves (`client.session`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

import anyio
from mcp.client.extension import ClaimContext, ClientExtension, ResultClaim
from mcp.client.session import ClientSession
from mcp_types import CallToolResult, Request, RequestParams, Result
from pydantic import ConfigDict, Field

TASKS_EXTENSION = "io.modelcontextprotocol/tasks"
TERMINAL = ("completed", "failed", "cancelled")


class CreateTaskResult(Result):
    model_config = ConfigDict(extra="allow", populate_by_name=True)

    result_type: Literal["task"] = Field(alias="resultType")
    task_id: str = Field(alias="taskId")
    status: str
    poll_interval_ms: int | None = Field(default=None, alias="pollIntervalMs")


class TaskState(Result):
    """What `tasks/get` answers: the task, and its result or error once it ended."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)

    task_id: str = Field(alias="taskId")
    status: str
    status_message: str | None = Field(default=None, alias="statusMessage")
    poll_interval_ms: int | None = Field(default=None, alias="pollIntervalMs")
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None


class TaskParams(RequestParams):
    task_id: str = Field(alias="taskId")


class GetTask(Request[TaskParams, Literal["tasks/get"]]):
    method: Literal["tasks/get"] = "tasks/get"
    params: TaskParams
    name_param = "taskId"  # the extension: Mcp-Name carries the task's id


class CancelTask(Request[TaskParams, Literal["tasks/cancel"]]):
    method: Literal["tasks/cancel"] = "tasks/cancel"
    params: TaskParams
    name_param = "taskId"


class EmptyAck(Result):
    model_config = ConfigDict(extra="allow")


async def get_task(session: ClientSession, task_id: str) -> TaskState:
    return await session.send_request(GetTask(params=TaskParams(taskId=task_id)), TaskState)


async def cancel_task(session: ClientSession, task_id: str) -> None:
    await session.send_request(CancelTask(params=TaskParams(taskId=task_id)), EmptyAck)


async def poll_task(session: ClientSession, task_id: str, timeout_s: float = 60) -> TaskState:
    """`tasks/get` until the task ended, at the interval it asks for (at most 1 s here)."""
    with anyio.fail_after(timeout_s):
        while True:
            state = await get_task(session, task_id)
            if state.status in TERMINAL:
                return state
            await anyio.sleep(min(1.0, (state.poll_interval_ms or 1000) / 1000))


class Tasks(ClientExtension):
    """Declare the extension; `call_tool` polls a task to its `CallToolResult`."""

    identifier = TASKS_EXTENSION

    def __init__(self) -> None:
        self.seen: list[str] = []  # the ids of the tasks this client was answered with

    def claims(self) -> Sequence[ResultClaim[Any]]:
        return (ResultClaim(result_type="task", model=CreateTaskResult, resolve=self._resolve),)

    async def _resolve(self, created: CreateTaskResult, ctx: ClaimContext) -> CallToolResult:
        self.seen.append(created.task_id)
        state = await poll_task(ctx.session, created.task_id)
        if state.status != "completed" or state.result is None:
            raise RuntimeError(f"task {created.task_id} ended {state.status}: {state.error}")
        return CallToolResult.model_validate(state.result, by_name=False)

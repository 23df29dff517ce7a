"""MCP tasks on the handshake era: revision 2025-11-25's (experimental) tasks, the same tasks.

One implementation, two wire shapes: a 2025-11-25 task is the 2026-07-28 extension's task
(`task_methods`: the same `TaskStore` record in Redis, the same `TaskRunner`, the same owner
check, take-over and cancel), shown as the 2025-11-25 revision spells it
(`specification/2025-11-25/basic/utilities/tasks`):

- A request whose `MCP-Protocol-Version` is 2025-11-25 may carry `params.task` (`{ttl?}`) on
  a `tools/call`: it is answered `CreateTaskResult` (`{"task": Task}`) once the call has
  passed every check and its record is in Redis; a refused call is answered as it always is.
  The task is kept the gateway's `task_ttl_s` (a `ttl` asked for is not honoured: the
  revision lets the receiver choose, and `ttl` in the answer says what it chose).
- `tasks/get` and `tasks/cancel` answer the `Task` (`ttl`, `pollInterval`, no result);
  cancelling an ended task is -32602, as the revision says. `tasks/result` waits until the
  task ends and answers what the call would have: the `CallToolResult` (a tool error's
  `isError` result too) with `_meta["io.modelcontextprotocol/related-task"]`, or its
  JSON-RPC error; a cancelled task's is CANCELLED.
- `initialize` advertises `capabilities.tasks` with `cancel` and `requests.tools.call` only:
  `tasks/list` is not served (a task is found by its id alone, kept per owner), and
  `notifications/tasks/status` is not sent (no stream of the call's request outlives it).
  Every tool is listed with `execution.taskSupport: "optional"` on 2025-11-25 (a tool
  without it is "forbidden" to a strict client): any call may run as a task, or not.
- A call's server asking its client (sampling, elicitation) while it runs as such a task gets
  an error: the revision delivers those through `tasks/result`'s stream, not served here.

An unknown, expired or another caller's task id: -32602 on both wires.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import anyio

from gateway.gateway_error import GatewayError
from gateway.mcp_tasks import TaskRecord
from protocol import ErrorCode, SerfError

HANDSHAKE_TASKS_VERSION = "2025-11-25"
HANDSHAKE_TASK_METHODS = ("tasks/get", "tasks/result", "tasks/cancel")
RELATED_TASK_META = "io.modelcontextprotocol/related-task"
# What initialize advertises on 2025-11-25: only what is served.
TASKS_CAPABILITY: dict[str, Any] = {"cancel": {}, "requests": {"tools": {"call": {}}}}
# What each listed tool carries on 2025-11-25: any tool may be called as a task.
TASK_SUPPORT: dict[str, Any] = {"execution": {"taskSupport": "optional"}}
# How long a tasks/cancel waits for the call to stop, to answer the task as cancelled.
CANCEL_SETTLE_S = 2.0


def asks_for_task(version: str | None, method: str, params: Mapping[str, Any]) -> bool:
    """Whether a handshake-era request is a `tools/call` the client asked to run as a task."""
    asked = isinstance(params.get("task"), dict)
    return version == HANDSHAKE_TASKS_VERSION and method == "tools/call" and asked


def serves_task_method(version: str | None, method: str) -> bool:
    return version == HANDSHAKE_TASKS_VERSION and method in HANDSHAKE_TASK_METHODS


def task(record: TaskRecord) -> dict[str, Any]:
    """The revision's `Task`: the record without its outcome, `ttl` and `pollInterval` in ms."""
    shown: dict[str, Any] = {
        "taskId": record.task_id,
        "status": record.status,
        "createdAt": (wire := record.wire())["createdAt"],
        "lastUpdatedAt": wire["lastUpdatedAt"],
        "ttl": record.ttl_ms,
        "pollInterval": record.poll_ms,
    }
    if record.message:
        shown["statusMessage"] = record.message
    return shown


def created(record: TaskRecord) -> dict[str, Any]:
    """The `CreateTaskResult` a `tools/call` asking for a task answers with."""
    return {"task": task(record)}


def already_ended(record: TaskRecord) -> GatewayError:
    return GatewayError.of(
        ErrorCode.NOT_FOUND,
        f"task {record.task_id!r} already ended ({record.status}): there is nothing left to"
        " cancel; tasks/result answers its outcome",
    )


async def settled(
    read: Callable[[], Awaitable[TaskRecord | None]],
    record: TaskRecord,
    poll_s: float,
    timeout_s: float | None,
) -> TaskRecord:
    """`record` once it ended (read again every `poll_s`), or as it stands after `timeout_s`
    (None: until it ends); a record gone meanwhile (expired) is the last one read."""
    with anyio.move_on_after(timeout_s):
        while not record.ended:
            await anyio.sleep(poll_s)  # the record is in Redis, written by whichever replica
            if (fresh := await read()) is None:
                break  # expired meanwhile
            record = fresh
    return record


def outcome(record: TaskRecord) -> dict[str, Any]:
    """`tasks/result`'s answer for the ended `record`; its JSON-RPC error raised as such."""
    if not record.ended:
        raise GatewayError.of(
            ErrorCode.NOT_FOUND,
            f"task {record.task_id!r} expired before it ended; tasks are kept for their ttl",
        )
    related = {RELATED_TASK_META: {"taskId": record.task_id}}
    if record.status == "completed" and record.outcome is not None:
        result = {k: v for k, v in record.outcome.items() if k != "resultType"}
        return {**result, "_meta": {**(result.get("_meta") or {}), **related}}
    if record.status == "failed" and isinstance(record.outcome, dict):
        data = record.outcome.get("data")
        if isinstance(data, dict):
            raise GatewayError(SerfError.model_validate(data))
    raise GatewayError.of(
        ErrorCode.CANCELLED if record.status == "cancelled" else ErrorCode.INTERNAL,
        f"task {record.task_id!r} ended {record.status} with no result"
        + (f": {record.message}" if record.message else ""),
    )


__all__ = [
    "CANCEL_SETTLE_S",
    "HANDSHAKE_TASKS_VERSION",
    "HANDSHAKE_TASK_METHODS",
    "RELATED_TASK_META",
    "TASKS_CAPABILITY",
    "TASK_SUPPORT",
    "already_ended",
    "asks_for_task",
    "created",
    "outcome",
    "serves_task_method",
    "settled",
    "task",
]

"""MCP tasks at `/mcp` (the extension `io.modelcontextprotocol/tasks`, 2026-07-28 wire).

What the extension asks, and what this serves (`ext-tasks`, `specification/draft/tasks.md`):

- `server/discover` lists the extension under `capabilities.extensions`.
- A `tools/call` runs as a task only for a client that declares the extension in the
  request's `io.modelcontextprotocol/clientCapabilities.extensions`, and then when the
  client asks for one (`params.task`, as the 2025-11-25 revision spelled it, or `_meta`
  `conclave/task: true`) or the tool declares itself long-running (a declared timeout of
  `task_long_running_ms`, 60 s by default, or more). The answer is then a `CreateTaskResult`
  (`resultType: "task"`), sent once the call has passed every check and its record is in
  Redis; a refused call is answered as it always is.
- `tasks/get` answers the task as it stands (its result or error once it ended), from any
  replica; `tasks/cancel` stops the call wherever it runs (its sandbox's process group is
  killed) and the task ends `cancelled`.
- Input: a request the call's MCP server sends its client (sampling, elicitation, roots; only
  those the request's `clientCapabilities` declared, `asking_client`) moves the task to
  `input_required`, and `tasks/get` shows it in `inputRequests` under an id the gateway
  issues (`ClientRequests`: bound to the caller's identity). `tasks/update` with
  `inputResponses` hands each answer to the waiting call, on whichever replica runs it; the
  task is `working` again once nothing is left unanswered. An answer to a key that is not
  outstanding, or not the caller's, is ignored, as the extension says; one not given by
  the call's answer deadline (`tools.calls.answer_deadline`) gets the server an error. A server
  that asks in rounds itself (`InputRequiredResult`, an upstream on the 2026-07-28 wire) is
  asked the same way, and its call run again with the answers (`gateway.mcp_tasks.task_rounds`).
  An unknown, expired or another caller's task id: -32602. A client not declaring the
  extension: -32021 (Missing Required Client Capability), HTTP 400.
- The outcome is what the call would have answered had it not been a task: `completed` with
  the `CallToolResult` (a tool error's `isError` result too, with its SERF envelope, as when
  the budget's deadline killed the call: DEADLINE_EXCEEDED), `failed` with the JSON-RPC error.

Every task method is a pipeline operation (authenticated, rate limited, audited); the task's
call is a tool call like any other (`gateway.mcp_tasks.TaskRunner`).
"""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import suppress
from functools import partial
from typing import Any

import anyio
from redis.exceptions import RedisError

from gateway.cancellation import InflightCalls, call_key
from gateway.gateway_error import GatewayError
from gateway.http.mcp import handshake_tasks
from gateway.http.mcp.messages import (
    McpMessage,
    is_tool_failure,
    rpc_error,
    tool_failure,
    tool_result,
)
from gateway.mcp_state import Action, ClientRequests
from gateway.mcp_tasks import TaskOutcome, TaskRecord, TaskRunner, TaskStore, task_request_id
from gateway.pipeline import RequestContext
from protocol import INPUT_RESPONSES, ErrorCode, InputRound, SerfError
from tools import ToolRegistry
from tools.calls import CallEvents

TASKS_EXTENSION = "io.modelcontextprotocol/tasks"
TASK_METHODS = ("tasks/get", "tasks/update", "tasks/cancel")
ASK_META = "conclave/task"  # `_meta` key by which a client asks for a task
MISSING_CAPABILITY = -32021  # the revision's Missing Required Client Capability
CANCELLED_BY_CALLER = "the caller sent tasks/cancel"
_CAPABILITIES_META = "io.modelcontextprotocol/clientCapabilities"


def declares_tasks(params: Mapping[str, Any]) -> bool:
    """Whether the request's client capabilities declare the tasks extension."""
    meta = params.get("_meta")
    capabilities = meta.get(_CAPABILITIES_META) if isinstance(meta, dict) else None
    extensions = capabilities.get("extensions") if isinstance(capabilities, dict) else None
    return isinstance(extensions, dict) and TASKS_EXTENSION in extensions


def runs_as_task(message: McpMessage, registry: ToolRegistry, long_running_ms: int) -> bool:
    """Whether the 2026-07-28 `tools/call` `message` is answered with a task."""
    if message.method != "tools/call" or not declares_tasks(message.params):
        return False
    meta = message.params.get("_meta")
    if isinstance(message.params.get("task"), dict):
        return True
    if isinstance(meta, dict) and meta.get(ASK_META) is True:
        return True
    name = message.params.get("name")
    tool = registry.get(name) if isinstance(name, str) else None
    return tool is not None and tool.spec.intent.timeout_ms >= long_running_ms


def created(record: TaskRecord) -> dict[str, Any]:
    """The `CreateTaskResult` a `tools/call` answers with (before the wire's own fields)."""
    return {"resultType": "task", **record.wire()}


def outcome_of(ctx: RequestContext) -> TaskOutcome:
    """How a task's call ended, as its `tools/call` would have answered it."""
    if ctx.error is None and isinstance(ctx.result, InputRound):  # still asking: given up
        unanswered = SerfError.of(
            ErrorCode.TOOL_FAILED,
            f"{ctx.tool_name} kept asking the client in rounds past what a task answers"
            " (or its task was taken over): call it without a task to answer it yourself",
            trace_id=ctx.trace_id,
        )
        return TaskOutcome("failed", rpc_error(None, unanswered)["error"], unanswered.message)
    if ctx.error is None:
        return TaskOutcome("completed", _typed(tool_result(ctx.result, ctx.trace_id, ctx.usage)))
    if ctx.error.code is ErrorCode.CANCELLED and ctx.cancel is not None and ctx.cancel.pulled:
        return TaskOutcome("cancelled", None, ctx.cancel.reason or "")
    if is_tool_failure(ctx.error, ctx.failed_stage):
        schema = ctx.tool is not None and ctx.tool.spec.output_schema is not None
        failure = tool_failure(ctx.error, ctx.usage, output_schema=schema)
        return TaskOutcome("completed", _typed(failure), ctx.error.code.value)
    error = rpc_error(None, ctx.error)["error"]
    return TaskOutcome("failed", error, ctx.error.message)


def _typed(result: dict[str, Any]) -> dict[str, Any]:
    return {**result, "resultType": "complete"}


def _unknown(task_id: object) -> GatewayError:
    shown = task_id if isinstance(task_id, str) and len(task_id) <= 64 else "(not an id)"
    return GatewayError.of(
        ErrorCode.NOT_FOUND,
        f"no task {shown!r} of yours: it never existed, it expired, or it is another"
        " caller's; tasks are kept for their ttlMs after creation",
    )


def asking_client(
    ctx: RequestContext,
    task_id: str,
    store: TaskStore,
    requests: ClientRequests,
    declared: Mapping[str, Any],
) -> CallEvents:
    """Where the task's call sends what it reports: its progress nowhere (nobody listens),
    its server's requests to the task's record, for the client's `tasks/update`."""

    async def ask(method: str, params: dict[str, Any]) -> object:
        principal = ctx.require_principal()
        input_id = requests.issue(principal)
        with requests.waiting(principal, input_id) as answers:
            request = {"method": method, "params": params}
            try:
                asked = await store.ask_input(principal.tenant, task_id, input_id, request)
            except (RedisError, OSError):
                asked = False
            if not asked:
                return {"error": {"code": -32603, "message": "the client cannot be reached"}}
            try:
                return await answers.receive()
            finally:  # answered, or the call stopped waiting: the question is no longer open
                with anyio.CancelScope(shield=True), suppress(RedisError, OSError):
                    await store.input_answered(principal.tenant, task_id, input_id)

    return CallEvents(_nobody_listens, ask=ask, capabilities=declared)


def _nobody_listens(_: object) -> bool:
    return False


def task_action(
    method: str,
    params: Mapping[str, Any],
    runner: TaskRunner,
    inflight: InflightCalls,
    requests: ClientRequests,
    *,
    handshake: bool = False,
) -> Action:
    """The pipeline action answering the task method `method` for the caller, on the
    2026-07-28 wire or (`handshake`) as revision 2025-11-25 shows tasks (`handshake_tasks`)."""
    task_id = params.get("taskId")

    async def answer(ctx: RequestContext) -> dict[str, Any]:
        principal = ctx.require_principal()
        record = None
        if isinstance(task_id, str):
            record = await runner.store.get(principal, task_id)
        if record is None:
            raise _unknown(task_id)
        if method == "tasks/get":
            if not record.ended and not await runner.store.leased(record.tenant, record.task_id):
                await runner.resume(record, ctx.headers)  # its replica is gone
                record = await runner.store.get(principal, record.task_id) or record
            return handshake_tasks.task(record) if handshake else record.wire()
        if method == "tasks/result":  # the handshake era's: waits for the end
            read = partial(runner.store.get, principal, record.task_id)
            poll_s = min(runner.store.poll_ms / 1000, 0.25)
            ended = await handshake_tasks.settled(read, record, poll_s, None)
            return handshake_tasks.outcome(ended)
        if method == "tasks/cancel" and handshake and record.ended:
            raise handshake_tasks.already_ended(record)
        if method == "tasks/cancel" and not record.ended:
            # Kept in the record too: a call taken over and not yet running sees it there.
            await runner.store.ask_cancel(record.tenant, record.task_id, CANCELLED_BY_CALLER)
            key = call_key(principal, task_request_id(record.task_id))
            await inflight.cancel(key, None, by=CANCELLED_BY_CALLER)
            if not await runner.store.leased(record.tenant, record.task_id):
                # No replica runs it (its own died): nothing to stop, only to record.
                await runner.store.finish(
                    record.tenant, record.task_id, "cancelled", None, CANCELLED_BY_CALLER
                )
        if method == "tasks/update" and record.status == "input_required":
            responses = params.get(INPUT_RESPONSES)
            for key, response in (responses if isinstance(responses, dict) else {}).items():
                outstanding = key in record.inputs and requests.issued_to(principal, key)
                if outstanding and isinstance(response, dict):
                    await requests.answer(principal, key, {"result": response})
        if method == "tasks/cancel" and handshake:
            # The revision answers the task cancelled: once its call stopped, or recorded so
            # now if stopping takes longer (its kill goes on; the runner's own end is then
            # not recorded again, the store ends a task once).
            read = partial(runner.store.get, principal, record.task_id)
            poll_s = min(runner.store.poll_ms / 1000, 0.05)
            stopped = await handshake_tasks.settled(
                read, record, poll_s, handshake_tasks.CANCEL_SETTLE_S
            )
            if not stopped.ended:
                await runner.store.finish(
                    record.tenant, record.task_id, "cancelled", None, CANCELLED_BY_CALLER
                )
                stopped = await read() or stopped
            return handshake_tasks.task(stopped)
        return {}

    return answer


__all__ = [
    "ASK_META",
    "MISSING_CAPABILITY",
    "TASKS_EXTENSION",
    "TASK_METHODS",
    "asking_client",
    "created",
    "declares_tasks",
    "outcome_of",
    "runs_as_task",
    "task_action",
]

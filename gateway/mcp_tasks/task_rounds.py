"""A task's call whose server asks in rounds itself (MCP 2026-07-28's `InputRequiredResult`,
from an upstream on that wire), carried on inside the task.

A plain call relays such a round to its client, which retries the call (`/mcp`'s
`input_rounds`). A task's client is not waiting on the call: it polls. So the task asks the
client each of the server's questions as the task's own (`CallEvents.request`: the task turns
`input_required`, the client answers with `tasks/update`), then runs the call again, as a
retry of it, with the answers under the server's own keys and the server's own
`requestState` (`protocol.InputAnswer`); the server may ask again, up to `MAX_ROUNDS`. A
question the client does not answer by the call's answer deadline is left out: the server
decides what a missing answer means (it may ask again).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import anyio

from gateway.pipeline import RequestContext
from protocol import InputAnswer, InputRound
from tools.calls import NO_CLIENT, answer_deadline

MAX_ROUNDS = 8  # a server that keeps asking ends its task with its last round unanswered


async def answered(ctx: RequestContext, asked: InputRound) -> RequestContext:
    """The retry of `ctx`'s call, carrying the client's answers to `asked`."""
    events = ctx.events
    assert events is not None and ctx.invocation is not None  # a task's call that asked
    deadline = answer_deadline(anyio.current_time(), ctx.invocation.limits.timeout_ms)
    answers: dict[str, Any] = {}

    async def ask(key: str, request: dict[str, Any]) -> None:
        message = {"jsonrpc": "2.0", "id": key, **request}
        reply = await events.request(message, deadline)
        if "result" in reply:
            answers[key] = reply["result"]

    async with anyio.create_task_group() as asking:
        for key, request in asked.requests.items():
            asking.start_soon(ask, key, request)
    retry = RequestContext(ctx.transport, ctx.operation, ctx.headers)
    retry.tool_name, retry.arguments, retry.meta = ctx.tool_name, ctx.arguments, ctx.meta
    retry.events, retry.cancel, retry.request_id = events, ctx.cancel, ctx.request_id
    retry.client = replace(ctx.client or NO_CLIENT, answer=InputAnswer(answers, asked.state))
    return retry


__all__ = ["MAX_ROUNDS", "answered"]

"""Delegating to another agent over A2A, through the gateway: `delegate` sends a message to the
A2A agent served at `{gateway}/a2a/{name}` (JSON-RPC `SendMessage`) as the caller's identity,
its deadline travelling with it, and reads the answer as a `Delegated` reply. An agent that
answers before its task is done (submitted, working: A2A asks it to wait, some do not) is
asked again (`GetTask`), at growing intervals, until the task is done, needs input, or the
caller's deadline refuses the next request.

A refusal or failure raises `GatewayCallError` with the SERF envelope: the gateway's own (in
the A2A error's data), or, for an error the agent itself answered, one built from it that
names the hop (`details.hop`) and the A2A error (`details.a2a_code`).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

import httpx

from agents.agent_errors import GatewayCallError
from protocol import CHAIN_HEADER, DEADLINE_HEADER, ErrorCode, SerfError


@dataclass(frozen=True)
class WorkingFor:
    """The task a worker is running (`serve_a2a` sets it around the handler): every request
    the client makes for the task carries its delegation chain (tool calls, state,
    delegations), so the gateway sees the hops, refuses a loop, lets the worker do for its
    caller no more than the caller may hand on and stops it all when the task ends; and its
    caller's deadline, so nothing done for the task outlives it."""

    chain: str
    deadline_ms: int | None = None
    # The task token (the agent's identity bound to the chain by the gateway) and the token
    # it stands in for: a client holding the worker's own token acts with the task's instead.
    token: str = ""
    worker_token: str | None = None

    def headers(self, headers: dict[str, str] | None, token: str | None) -> dict[str, str]:
        """`headers` of a request by a client holding `token`: with the task's chain (and its
        task token in place of the worker's own), and its deadline when none sooner is
        asked."""
        carried = (
            {**(headers or {}), CHAIN_HEADER: self.chain} if self.chain else {**(headers or {})}
        )
        if self.token and token is not None and token == self.worker_token:
            carried["Authorization"] = f"Bearer {self.token}"
        if self.deadline_ms is not None:
            asked = carried.get(DEADLINE_HEADER)
            if asked is None or not asked.isdigit() or int(asked) > self.deadline_ms:
                carried[DEADLINE_HEADER] = str(self.deadline_ms)
        return carried


WORKING_FOR: ContextVar[WorkingFor | None] = ContextVar("conclave_working_for", default=None)
SERF_TYPE_SUFFIX = "conclave.SerfError"  # the `@type` of the envelope in an A2A error's data


@dataclass(frozen=True)
class Delegated:
    """What the agent answered: the task it works on (None for a plain message), its state
    (`TASK_STATE_COMPLETED`, `..._INPUT_REQUIRED`, ...), and the text of its latest message
    and artifacts."""

    text: str
    task_id: str | None = None
    context_id: str | None = None
    state: str | None = None
    raw: dict[str, Any] = field(default_factory=dict, repr=False)


def send_message_request(
    text: str, *, task_id: str | None = None, context_id: str | None = None
) -> dict[str, Any]:
    """The JSON-RPC `SendMessage` request carrying `text` (continuing `task_id` when given)."""
    message: dict[str, Any] = {
        "messageId": uuid.uuid4().hex,
        "role": "ROLE_USER",
        "parts": [{"text": text}],
    }
    if task_id is not None:
        message["taskId"] = task_id
    if context_id is not None:
        message["contextId"] = context_id
    return {
        "jsonrpc": "2.0",
        "id": uuid.uuid4().hex,
        "method": "SendMessage",
        "params": {"message": message},
    }


# States in which the agent is still working: `delegate` asks again (GetTask) until it is not.
WORKING = frozenset({"TASK_STATE_SUBMITTED", "TASK_STATE_WORKING"})


def get_task_request(task_id: str) -> dict[str, Any]:
    """The JSON-RPC `GetTask` request for `task_id`."""
    return {
        "jsonrpc": "2.0",
        "id": uuid.uuid4().hex,
        "method": "GetTask",
        "params": {"id": task_id},
    }


def reply_reader(agent: str) -> Callable[[httpx.Response], Delegated]:
    """Reads `agent`'s answer (through the gateway) as a reply, or raises its error."""

    def read(response: httpx.Response) -> Delegated:
        try:
            answer = response.json()
        except ValueError:
            raise _hop_error(agent, None, f"HTTP {response.status_code}, not JSON") from None
        return delegated_reply(agent, answer)

    return read


def delegated_reply(agent: str, answer: Any) -> Delegated:
    """The reply in a JSON-RPC answer from `agent`, or the error it carries, raised."""
    if not isinstance(answer, dict):
        raise _hop_error(agent, None, "the answer is not a JSON-RPC response")
    if "error" in answer:
        raise _from_rpc_error(agent, answer["error"])
    result = answer.get("result")
    if isinstance(result, dict) and isinstance(result.get("status"), dict):
        result = {"task": result}  # GetTask answers the task itself
    if isinstance(result, dict) and isinstance(result.get("task"), dict):
        task = result["task"]
        status = task.get("status") or {}
        texts = _texts((status.get("message") or {}).get("parts"))
        for artifact in task.get("artifacts") or []:
            texts += _texts(artifact.get("parts"))
        return Delegated(
            "\n".join(texts), task.get("id"), task.get("contextId"), status.get("state"), task
        )
    if isinstance(result, dict) and isinstance(result.get("message"), dict):
        message = result["message"]
        text = "\n".join(_texts(message.get("parts")))
        return Delegated(text, message.get("taskId"), message.get("contextId"), None, message)
    raise _hop_error(agent, None, "the answer holds neither a task nor a message")


def _texts(parts: Any) -> list[str]:
    if not isinstance(parts, list):
        return []
    return [p["text"] for p in parts if isinstance(p, dict) and isinstance(p.get("text"), str)]


def _from_rpc_error(agent: str, error: Any) -> GatewayCallError:
    data = error.get("data") if isinstance(error, dict) else None
    for detail in data if isinstance(data, list) else []:
        if isinstance(detail, dict) and str(detail.get("@type", "")).endswith(SERF_TYPE_SUFFIX):
            fields = {k: v for k, v in detail.items() if k != "@type"}
            return GatewayCallError(SerfError.model_validate(fields))
    code = error.get("code") if isinstance(error, dict) else None
    message = error.get("message") if isinstance(error, dict) else None
    return _hop_error(agent, code, str(message or "an error without a message"))


def _hop_error(agent: str, code: Any, message: str) -> GatewayCallError:
    serf = SerfError.of(
        ErrorCode.TOOL_FAILED,
        f"A2A agent {agent!r} answered an error: {message[:500]}",
        details={"hop": agent, "a2a_code": code},
    )
    return GatewayCallError(serf)

"""`TaskRecord`: one MCP task as Redis holds it, and as `tasks/get` shows it.

A task is a `tools/call` run apart from the request that asked for it (the extension
`io.modelcontextprotocol/tasks`). Its record says who owns it, what was called (so another
replica can run an idempotent call again), where it stands, and its outcome once it ends:
the JSON-RPC result (`completed`, a tool error's `isError` result too) or the JSON-RPC error
(`failed`) the call would have answered had it not been a task. While the call waits for its
client to answer what its server asked, the task is `input_required` and shows the questions.
"""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

TaskStatus = Literal["working", "input_required", "completed", "failed", "cancelled"]
TERMINAL: frozenset[str] = frozenset(("completed", "failed", "cancelled"))
# An id is 192 random bits (it is all a caller needs to name the task, so it must not be
# guessable); what a caller sends is checked against this before it names a Redis key.
TASK_ID_PATTERN = re.compile(r"^[A-Za-z0-9_-]{16,64}$")


def new_task_id() -> str:
    return secrets.token_urlsafe(24)


@dataclass(frozen=True)
class TaskCall:
    """What the task runs: the served tool's name, its arguments, the unix ms by which it
    must end (the budget's deadline, kept across a take-over), and whether the tool declared
    itself idempotent (only such a call is run again after its replica died)."""

    tool: str
    arguments: dict[str, Any]
    deadline_ms: int | None
    idempotent: bool

    def as_json(self) -> dict[str, Any]:
        return {
            "tool": self.tool,
            "arguments": self.arguments,
            "deadline_ms": self.deadline_ms,
            "idempotent": self.idempotent,
        }

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> TaskCall:
        return cls(
            tool=str(raw["tool"]),
            arguments=dict(raw["arguments"]),
            deadline_ms=raw.get("deadline_ms"),
            idempotent=bool(raw.get("idempotent")),
        )


@dataclass(frozen=True)
class TaskRecord:
    task_id: str
    tenant: str
    agent: str
    status: TaskStatus
    message: str
    created_ms: int
    updated_ms: int
    ttl_ms: int
    poll_ms: int
    call: TaskCall
    attempts: int = 1
    outcome: dict[str, Any] | None = None  # the result (completed) or the error (failed)
    # What the call asks its client, unanswered (input_required): input id -> request.
    inputs: dict[str, Any] = field(default_factory=dict)

    @property
    def ended(self) -> bool:
        return self.status in TERMINAL

    def wire(self) -> dict[str, Any]:
        """The extension's `Task` (a `DetailedTask`: the result or error once it ended)."""
        task: dict[str, Any] = {
            "taskId": self.task_id,
            "status": self.status,
            "createdAt": _iso(self.created_ms),
            "lastUpdatedAt": _iso(self.updated_ms),
            "ttlMs": self.ttl_ms,
            "pollIntervalMs": self.poll_ms,
        }
        if self.message:
            task["statusMessage"] = self.message
        if self.status == "input_required" and self.inputs:
            task["inputRequests"] = self.inputs
        if self.status == "completed" and self.outcome is not None:
            task["result"] = self.outcome
        elif self.status == "failed" and self.outcome is not None:
            task["error"] = self.outcome
        return task


def _iso(unix_ms: int) -> str:
    when = datetime.fromtimestamp(unix_ms / 1000, UTC)
    return when.isoformat(timespec="milliseconds").replace("+00:00", "Z")


__all__ = ["TASK_ID_PATTERN", "TERMINAL", "TaskCall", "TaskRecord", "TaskStatus", "new_task_id"]

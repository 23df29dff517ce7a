"""The wire between the gateway and the workers that serve a hosted A2A agent
(`POST /v1/a2a/{name}/work/next`, `POST /v1/a2a/{name}/work/{task_id}`): a claimed task, a
worker's update to it, and the gateway's answer. The A2A objects inside (messages, artifacts)
are A2A 1.0's JSON, camelCase, as a caller sent them or the worker writes them."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

A2A_WORK_STATES = (  # what a worker may set a task to
    "TASK_STATE_WORKING",
    "TASK_STATE_COMPLETED",
    "TASK_STATE_FAILED",
    "TASK_STATE_REJECTED",
    "TASK_STATE_INPUT_REQUIRED",
    "TASK_STATE_AUTH_REQUIRED",
)


class A2aCaller(BaseModel):
    """Who sent the task: the caller's identity as the gateway authenticated it."""

    tenant: str
    agent: str
    obo: str | None = None  # the user the caller acts for, when it does
    # The delegation chain to send on with any delegation the task makes (`CHAIN_HEADER`):
    # signed by the gateway, so an agent can pass it on but not change it.
    chain: str = ""


class A2aWorkItem(BaseModel):
    """A task a worker claimed: its messages so far (the caller's and the agent's), who asked,
    the caller's deadline, and the lease: `token` goes with every write, which must come
    before `lease_expires_ms` (each write renews it)."""

    model_config = ConfigDict(frozen=True)

    task_id: str
    context_id: str
    messages: list[dict[str, Any]]
    caller: A2aCaller
    deadline_ms: int | None = None  # unix ms: the caller's deadline, when it sent one
    token: int
    lease_expires_ms: int
    # The agent's token bound to this task's delegation chain (`TokenClaims.chain`), valid
    # until the caller's deadline: what the worker does for the task it does with this, so
    # the chain goes with it even where the agent's code sends no chain header.
    task_token: str = ""

    @property
    def text(self) -> str:
        """The text parts of the latest message from the caller."""
        for message in reversed(self.messages):
            if message.get("role") == "ROLE_USER":
                parts = message.get("parts") or []
                return "\n".join(p["text"] for p in parts if isinstance(p.get("text"), str))
        return ""


class A2aWorkUpdate(BaseModel):
    """A worker's write to its task: the state, an optional agent message (the status's),
    an optional artifact. `token` is the lease's: a write after the lease moved on is FENCED.
    `as_message`: the message is the agent's whole answer, as A2A lets an agent answer
    SendMessage with a Message instead of a Task (the task ends holding it)."""

    model_config = ConfigDict(extra="forbid")

    token: int
    state: str = Field(pattern="^(" + "|".join(A2A_WORK_STATES) + ")$")
    message: dict[str, Any] | None = None
    artifact: dict[str, Any] | None = None
    as_message: bool = False
    # The artifact is a chunk (A2A's TaskArtifactUpdateEvent): `append` adds its parts to the
    # task's artifact of the same artifactId; `last_chunk` says whether more follow.
    append: bool = False
    last_chunk: bool | None = None


class A2aWorkAck(BaseModel):
    """The gateway's answer to an update: whether the task was cancelled meanwhile (then the
    worker stops), and when the renewed lease ends."""

    cancelled: bool = False
    lease_expires_ms: int = 0

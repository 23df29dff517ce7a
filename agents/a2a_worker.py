"""Serving a hosted A2A agent as a worker: `serve_a2a` pulls the agent's tasks from the
gateway (an outbound connection only: the agent needs no inbound port), runs the handler on
each and writes its answer back.

The gateway leases each task to the worker that claimed it; every write renews the lease
and carries its fencing token. While the handler runs, a heartbeat writes "working" every
third of the lease, so a live worker keeps its task and learns within that time that the
caller cancelled it (the handler is then cancelled). A write the gateway refuses FENCED
means the lease moved on (this worker was too slow, and the task went to another or
failed): the handler is stopped and its answer dropped.
"""

from __future__ import annotations

import base64
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import anyio
import httpx

from agents.agent_errors import GatewayCallError, error_from_response
from agents.client import GatewayClient
from agents.delegation import WORKING_FOR, WorkingFor
from protocol import A2aWorkAck, A2aWorkItem, A2aWorkUpdate, ErrorCode

WorkItem = A2aWorkItem  # a claimed task: its messages, its caller, its deadline
_POLL_WAIT_S = 20.0


@dataclass(frozen=True)
class Artifact:
    """An output of the task: A2A parts (text, a file's bytes or URL, JSON data), each built
    by one of the class methods."""

    parts: tuple[dict[str, Any], ...]
    name: str | None = None

    @classmethod
    def text(cls, text: str, *, name: str | None = None) -> Artifact:
        return cls(({"text": text},), name)

    @classmethod
    def file(
        cls, content: bytes, *, filename: str, media_type: str, name: str | None = None
    ) -> Artifact:
        raw = base64.b64encode(content).decode()
        return cls(({"raw": raw, "filename": filename, "mediaType": media_type},), name)

    @classmethod
    def file_url(
        cls, url: str, *, filename: str, media_type: str, name: str | None = None
    ) -> Artifact:
        return cls(({"url": url, "filename": filename, "mediaType": media_type},), name)

    @classmethod
    def data(cls, value: Any, *, name: str | None = None) -> Artifact:
        return cls(({"data": value},), name)

    def as_json(self, artifact_id: str) -> dict[str, Any]:
        named = {"name": self.name} if self.name is not None else {}
        return {"artifactId": artifact_id, **named, "parts": list(self.parts)}


@dataclass(frozen=True)
class Reply:
    """A handler's answer: the agent's message `text` ("": none), the state it leaves the
    task in (completed; or TASK_STATE_INPUT_REQUIRED to ask the caller, whose next message
    with the task id comes back as a new claim), and the task's artifacts, in order (`artifact`:
    one artifact's text). `as_message`: the caller gets the message alone, not the task (A2A
    lets an agent answer so; the task still ends, holding it)."""

    text: str = ""
    state: str = "TASK_STATE_COMPLETED"
    artifact: str | None = None
    artifacts: tuple[Artifact, ...] = ()
    as_message: bool = False

    def outputs(self) -> list[Artifact]:
        return [*self.artifacts, *([Artifact.text(self.artifact)] if self.artifact else [])]


Handler = Callable[[WorkItem], Awaitable["str | Reply"]]


class TaskLost(Exception):
    """The lease moved on (FENCED) or the task is gone: this worker's work on it is void."""


async def serve_a2a(
    client: GatewayClient,
    name: str,
    handle: Handler,
    *,
    concurrency: int = 1,
    stop: anyio.Event | None = None,
) -> None:
    """Serve hosted A2A agent `name` (the client holds that agent's token) until `stop` is
    set or the surrounding scope is cancelled, `concurrency` tasks at a time."""
    stop = stop or anyio.Event()
    async with anyio.create_task_group() as workers:
        for _ in range(concurrency):
            workers.start_soon(_work_loop, client, name, handle, stop)
        await stop.wait()
        workers.cancel_scope.cancel()


async def _work_loop(client: GatewayClient, name: str, handle: Handler, stop: anyio.Event) -> None:
    while not stop.is_set():
        try:
            item = await claim(client, name, _POLL_WAIT_S)
        except GatewayCallError as exc:
            if not exc.serf.retryable:
                raise  # not this worker's agent, or not served: it names the fix
            await anyio.sleep(1.0)  # the gateway is away: ask again
            continue
        if item is not None:
            await run_task(client, name, item, handle)


async def claim(client: GatewayClient, name: str, wait_s: float) -> WorkItem | None:
    """The next task of `name`, leased to this worker, waiting up to `wait_s` (None: none)."""
    answer: WorkItem | None = await client._request(
        "POST", f"/v1/a2a/{name}/work/next?wait_s={wait_s:g}", read=_read_claim
    )
    return answer


async def write(
    client: GatewayClient,
    name: str,
    item: WorkItem,
    state: str,
    *,
    text: str | None = None,
    artifact: Artifact | None = None,
    as_message: bool = False,
    artifact_id: str | None = None,
    append: bool = False,
    last_chunk: bool | None = None,
) -> A2aWorkAck:
    """One update of `item` under its lease (renewing it); TaskLost when FENCED.
    `artifact_id`: the artifact's (by default a new one; the task's artifact of that id, if
    any, is replaced). `append`: `artifact` is a chunk, its parts added to the artifact of
    `artifact_id`; `last_chunk`: whether it is the last (subscribers see both as written)."""
    update = A2aWorkUpdate(
        token=item.token,
        state=state,
        message=_message(text) if text is not None else None,
        artifact=artifact.as_json(artifact_id or uuid.uuid4().hex) if artifact else None,
        as_message=as_message,
        append=append,
        last_chunk=last_chunk,
    )
    try:
        ack: A2aWorkAck = await client._request(
            "POST",
            f"/v1/a2a/{name}/work/{item.task_id}",
            json=update.model_dump(mode="json", exclude_none=True),
            read=_read_ack,
        )
    except GatewayCallError as exc:
        if exc.serf.code in (ErrorCode.FENCED, ErrorCode.NOT_FOUND):
            raise TaskLost(exc.serf.message) from exc
        raise
    return ack


async def run_task(client: GatewayClient, name: str, item: WorkItem, handle: Handler) -> None:
    """Run `handle` on one claimed task and write its answer; a cancel or a lost lease
    stops the handler."""
    lease_s = max(0.05, (item.lease_expires_ms - time.time() * 1000) / 1000)
    outcome: list[str | Reply] = []
    failure: list[BaseException] = []
    stopped: list[str] = []  # why the heartbeat stopped the handler: cancelled, lost
    try:
        if (await write(client, name, item, "TASK_STATE_WORKING")).cancelled:
            return
        async with anyio.create_task_group() as group:

            async def run() -> None:
                # Every request the handler makes through a client carries the task's chain
                # and deadline.
                task = WorkingFor(
                    item.caller.chain, item.deadline_ms, item.task_token, client.token
                )
                WORKING_FOR.set(task)
                try:
                    outcome.append(await handle(item))
                except Exception as exc:  # the handler's own failure: the task fails
                    failure.append(exc)
                group.cancel_scope.cancel()  # the heartbeat with it

            async def heartbeat() -> None:
                while True:
                    await anyio.sleep(lease_s / 3)
                    try:
                        ack = await write(client, name, item, "TASK_STATE_WORKING")
                    except TaskLost:
                        ack = A2aWorkAck(cancelled=True)
                    except GatewayCallError:
                        continue  # the gateway away for a moment: the next beat tries again
                    if ack.cancelled:  # cancelled, or no longer ours: stop the handler
                        stopped.append("stopped")
                        group.cancel_scope.cancel()
                        return

            group.start_soon(run)
            group.start_soon(heartbeat)
        if stopped:
            return
        if failure:
            text = f"{type(failure[0]).__name__}: {failure[0]}"
            await write(client, name, item, "TASK_STATE_FAILED", text=text)
        elif outcome:
            await _answer(client, name, item, outcome[0])
    except TaskLost:
        return  # another worker has it, or the gateway ended it: nothing of ours lands


async def _answer(client: GatewayClient, name: str, item: WorkItem, answer: str | Reply) -> None:
    """The handler's answer written: each artifact but the last while the task works (its
    subscribers see each as it lands), the last with the final state and the message.

    An artifact's id is the task's, its turn's (the messages so far) and its place: a worker
    that runs the task again after another died mid-answer writes the same ids, which replace
    what the dead one wrote, so no artifact is lost or doubled."""
    reply = answer if isinstance(answer, Reply) else Reply(str(answer))
    outputs: list[Artifact | None] = [*reply.outputs()] or [None]
    ids = [f"{item.task_id}-{len(item.messages)}-{i}" for i in range(len(outputs))]
    for artifact, artifact_id in zip(outputs[:-1], ids, strict=False):
        await write(
            client, name, item, "TASK_STATE_WORKING", artifact=artifact, artifact_id=artifact_id
        )
    text = reply.text if reply.text or reply.as_message else None
    await write(
        client,
        name,
        item,
        reply.state,
        text=text,
        artifact=outputs[-1],
        as_message=reply.as_message,
        artifact_id=ids[-1],
    )


def _message(text: str) -> dict[str, Any]:
    return {"messageId": uuid.uuid4().hex, "role": "ROLE_AGENT", "parts": [{"text": text}]}


def _read_claim(response: httpx.Response) -> WorkItem | None:
    if response.status_code == 204:
        return None
    if response.status_code >= 400:
        raise error_from_response(response)
    return A2aWorkItem.model_validate_json(response.content)


def _read_ack(response: httpx.Response) -> A2aWorkAck:
    if response.status_code >= 400:
        raise error_from_response(response)
    return A2aWorkAck.model_validate_json(response.content)

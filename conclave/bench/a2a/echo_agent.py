"""A small A2A 1.0 agent on the reference SDK (`a2a-sdk`), served by uvicorn in a child process:
the upstream `conclave bench a2a` and the A2A tests put behind `[[a2a_agent]]`.

What it does with a message's text:
- `who`: answers with the identity headers it was sent (`x-conclave-*`), as JSON text;
- `wait`: starts working and waits for a cancel (a task that stays open);
- `ask`: asks for input (the task stays `TASK_STATE_INPUT_REQUIRED`);
- `sleep <s>`: completes after `<s>` seconds;
- anything else: completes the task with `echo: <text>` as its message.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path

import anyio
import uvicorn
from a2a.helpers.proto_helpers import new_task_from_user_message
from a2a.server.agent_execution.agent_executor import AgentExecutor
from a2a.server.agent_execution.context import RequestContext
from a2a.server.events.event_queue import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes, create_rest_routes
from a2a.server.tasks.inmemory_push_notification_config_store import (
    InMemoryPushNotificationConfigStore,
)
from a2a.server.tasks.inmemory_task_store import InMemoryTaskStore
from a2a.server.tasks.task_updater import TaskUpdater
from a2a.types import AgentCapabilities, AgentCard, AgentInterface, AgentSkill, Part
from a2a.utils.signing import ProtectedHeader, create_agent_card_signer
from starlette.applications import Starlette
from starlette.types import ASGIApp, Receive, Scope, Send

from conclave.bench.core import running_child_server
from conclave.stack import free_port

_HEADERS: ContextVar[dict[str, str] | None] = ContextVar("headers", default=None)
REST_PATH = "/rest"


class _Executor(AgentExecutor):
    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        task_id, context_id = context.task_id or "", context.context_id or ""
        updater = TaskUpdater(event_queue, task_id, context_id)
        if context.current_task is None and context.message is not None:
            await event_queue.enqueue_event(new_task_from_user_message(context.message))
        text = context.get_user_input()
        if text == "who":
            seen = {k: v for k, v in (_HEADERS.get() or {}).items() if k.startswith("x-conclave-")}
            await updater.complete(updater.new_agent_message([Part(text=json.dumps(seen))]))
        elif text == "wait":
            await updater.start_work()
        elif text.startswith("sleep "):
            await anyio.sleep(float(text.split()[1]))
            await updater.complete(updater.new_agent_message([Part(text="slept")]))
        elif text == "ask":
            await updater.requires_input(updater.new_agent_message([Part(text="which one?")]))
        else:
            await updater.complete(updater.new_agent_message([Part(text=f"echo: {text}")]))

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        updater = TaskUpdater(event_queue, context.task_id or "", context.context_id or "")
        await updater.cancel()


def _remember_headers(app: ASGIApp) -> ASGIApp:
    async def remembering(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            _HEADERS.set({k.decode(): v.decode() for k, v in scope["headers"]})
        await app(scope, receive, send)

    return remembering


def agent_app(base_url: str, card_key: Path | None = None) -> ASGIApp:
    """The agent at `base_url`; its card signed with the PEM private key in `card_key` (the
    reference SDK's signer: JWS, ES256) when one is given."""
    card = AgentCard(
        name="Echo",
        description="Echoes what it is sent (Conclave's tests)",
        version="1.0.0",
        supported_interfaces=[
            AgentInterface(url=base_url, protocol_binding="JSONRPC", protocol_version="1.0"),
            AgentInterface(
                url=base_url + REST_PATH, protocol_binding="HTTP+JSON", protocol_version="1.0"
            ),
        ],
        capabilities=AgentCapabilities(streaming=True, push_notifications=True),
        default_input_modes=["text"],
        default_output_modes=["text"],
        skills=[AgentSkill(id="echo", name="Echo", description="echoes", tags=["test"])],
    )
    if card_key is not None:
        header = ProtectedHeader(kid="echo-key", alg="ES256", jku=None, typ="JOSE")
        card = create_agent_card_signer(card_key.read_bytes(), header)(card)
    handler = DefaultRequestHandler(
        agent_executor=_Executor(),
        task_store=InMemoryTaskStore(),
        agent_card=card,
        push_config_store=InMemoryPushNotificationConfigStore(),  # kept, never sent
    )
    routes = [
        *create_agent_card_routes(card),
        *create_jsonrpc_routes(request_handler=handler, rpc_url="/"),
        *create_rest_routes(request_handler=handler, path_prefix=REST_PATH),
    ]
    return _remember_headers(Starlette(routes=routes))


@contextmanager
def running_agent(timeout_s: float = 30.0, card_key: Path | None = None) -> Iterator[str]:
    """The agent in a child process on a free local port (its card signed with `card_key`, a
    PEM EC private key, when given); yields its base URL."""
    port = free_port()
    signing = ["--card-key", str(card_key)] if card_key is not None else []
    with running_child_server(
        ["conclave.bench.a2a.echo_agent", "--port", str(port), *signing], port, timeout_s
    ):
        yield f"http://127.0.0.1:{port}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--card-key", type=Path, default=None)
    arguments = parser.parse_args()
    port = arguments.port
    app = agent_app(f"http://127.0.0.1:{port}", arguments.card_key)
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


if __name__ == "__main__":
    main()

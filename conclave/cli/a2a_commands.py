"""`conclave a2a worker NAME --handler module:function`: serve a hosted A2A agent from this
machine. The worker connects out to `--gateway` with the agent's own token and pulls its
tasks (no inbound port); each task's handler is the named async function, called with the
task (`agents.WorkItem`) and answering its text (or an `agents.Reply`). Run more workers, on
any machine, to serve more tasks at once; Ctrl-C stops this one.
"""

from __future__ import annotations

import importlib
import sys
from typing import Annotated, Any

import typer

from conclave.cli.agents_commands import GatewayOption, TokenOption, bearer, fail
from conclave.stack import DEFAULT_GATEWAY

a2a_app = typer.Typer(no_args_is_help=True, help="Agents served as A2A agents.")


@a2a_app.command("worker")
def worker(
    name: Annotated[str, typer.Argument(help="the hosted agent ([[a2a_agent]] without a url)")],
    handler: Annotated[
        str, typer.Option(help="module:function, an async function of the task to its answer")
    ],
    gateway: GatewayOption = DEFAULT_GATEWAY,
    token: TokenOption = None,
    concurrency: Annotated[int, typer.Option(min=1, help="tasks served at once")] = 1,
) -> None:
    """Pull NAME's tasks from the gateway and answer each with HANDLER."""
    bearer(token, f"the token of agent {name!r} of the tenant the gateway declares it for")
    handle = _handler(handler)
    import anyio

    from agents import GatewayClient, serve_a2a

    async def serve() -> None:
        async with GatewayClient(gateway, token) as client:
            await serve_a2a(client, name, handle, concurrency=concurrency)

    try:
        anyio.run(serve)
    except KeyboardInterrupt:
        return


def _handler(spec: str) -> Any:
    module_name, _, function = spec.partition(":")
    if not module_name or not function:
        fail(f"--handler {spec!r}: write module:function (an async function of the task)")
    sys.path.insert(0, "")  # a module beside the user, as `python -m` finds it
    try:
        found = getattr(importlib.import_module(module_name), function)
    except (ImportError, AttributeError) as exc:
        fail(f"--handler {spec!r}: {exc}")
    if not callable(found):
        fail(f"--handler {spec!r} is not a function")
    return found

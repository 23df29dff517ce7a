"""An MCP server on the 2026-07-28 wire that asks its client in rounds, for the tests.

Built on the official `mcp` SDK's `MCPServer` (2.x), which serves both eras on one endpoint
and seals every `requestState` it hands out (AES-GCM under a key of this process), so a state
changed on the way back is refused. Its tools answer `InputRequiredResult` themselves, as the
revision's multi round-trip requests (and the conformance 0.2 line's
`input-required-result-*` scenarios) describe:

- `ask_name`: round 1 asks `user_name` (an elicitation) with the state `asked-name`; the retry
  carrying that state and the answer completes with "Hello, <name>! state-ok"; a retry
  without the answer asks again.
- `two_steps`: `step1` (state `step1`), then `step2` (state `step2:<first answer>`), then
  "<first>+<second>": three rounds, the state changing on each.
- `echo`: answers its `message` in one round.

A read and a prompt that ask too, in the era the request speaks: on 2026-07-28 in rounds (an
`InputRequiredResult` with the state `asked-reader`), on the handshake era mid-request (an
`elicitation/create` the client answers while the read waits):

- the resource template `rounds://letter/{sender}`: "<sender> writes to <name>", the name
  asked under `reader`;
- the prompt `dedication` (argument `topic`): one user message, "Write about <topic> for
  <name>", the name asked under `reader`.

Run `python -m tools.harness.input_rounds_server --port N` (streamable HTTP at `/mcp`), or
`--stdio` (by path, as an `mcp_stdio` source's command).
It lives in `tools.harness` beside the conformance fixture; it is not a tool module.
"""

from __future__ import annotations

import argparse
from typing import Any

import uvicorn
from mcp.server.mcpserver import Context, MCPServer
from mcp_types import ElicitRequest, InputRequiredResult
from pydantic import BaseModel

NAME_SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}

server = MCPServer("input-rounds")
ROUNDS_VERSION = "2026-07-28"


class _Name(BaseModel):
    name: str


def _ask(key: str, message: str, state: str) -> InputRequiredResult:
    request = ElicitRequest.model_validate(
        {
            "method": "elicitation/create",
            "params": {"mode": "form", "message": message, "requestedSchema": NAME_SCHEMA},
        }
    )
    return InputRequiredResult(input_requests={key: request}, request_state=state)


def _answered(ctx: Context, key: str) -> str | None:
    """The name the client answered under `key`, if it accepted."""
    response: Any = (ctx.input_responses or {}).get(key)
    content = getattr(response, "content", None)
    if content is None and isinstance(response, dict):
        content = response.get("content")
    name = content.get("name") if isinstance(content, dict) else None
    return name if isinstance(name, str) else None


@server.tool()
async def ask_name(ctx: Context) -> str | InputRequiredResult:
    """Greets the user by the name it asks the client for."""
    name = _answered(ctx, "user_name")
    if ctx.request_state != "asked-name" or name is None:
        return _ask("user_name", "What is your name?", "asked-name")
    return f"Hello, {name}! state-ok"


@server.tool()
async def two_steps(ctx: Context) -> str | InputRequiredResult:
    """Asks two questions, one round each."""
    state = ctx.request_state or ""
    if state == "step1" and (first := _answered(ctx, "step1")) is not None:
        return _ask("step2", "And the second?", f"step2:{first}")
    if state.startswith("step2:") and (second := _answered(ctx, "step2")) is not None:
        return f"{state.removeprefix('step2:')}+{second}"
    return _ask("step1", "The first?", "step1")


@server.tool()
async def echo(message: str) -> str:
    """Answers its message."""
    return message


async def _reader(ctx: Context) -> str | InputRequiredResult:
    """The reader's name: a round of its own on 2026-07-28, an elicitation mid-request before."""
    if ctx.protocol_version == ROUNDS_VERSION:
        name = _answered(ctx, "reader")
        if ctx.request_state != "asked-reader" or name is None:
            return _ask("reader", "Who reads this?", "asked-reader")
        return name
    asked = await ctx.elicit("Who reads this?", _Name)
    return asked.data.name if asked.action == "accept" else "nobody"


@server.resource("rounds://letter/{sender}")
async def letter(sender: str, ctx: Context) -> str | InputRequiredResult:
    """A letter from `sender` to the reader it asks the client for."""
    name = await _reader(ctx)
    return name if isinstance(name, InputRequiredResult) else f"{sender} writes to {name}"


@server.prompt()
async def dedication(topic: str, ctx: Context) -> str | InputRequiredResult:
    """Asks for a text on `topic`, dedicated to the reader it asks the client for."""
    name = await _reader(ctx)
    return name if isinstance(name, InputRequiredResult) else f"Write about {topic} for {name}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--port", type=int, help="serve streamable HTTP at /mcp on this port")
    where.add_argument("--stdio", action="store_true", help="serve on stdin/stdout")
    args = parser.parse_args()
    if args.stdio:  # an mcp_stdio source's server, started by path in a sandbox
        server.run("stdio")
        return
    app = server.streamable_http_app()
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()

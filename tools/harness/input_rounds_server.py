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

Run `python -m tools.harness.input_rounds_server --port N` (streamable HTTP at `/mcp`).
It lives in `tools.harness` beside the conformance fixture; it is not a tool module.
"""

from __future__ import annotations

import argparse
from typing import Any

import uvicorn
from mcp.server.mcpserver import Context, MCPServer
from mcp_types import ElicitRequest, InputRequiredResult

NAME_SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}

server = MCPServer("input-rounds")


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    app = server.streamable_http_app()
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()

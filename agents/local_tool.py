"""`@local_tool`: a typed Python function becomes a `LocalTool` the agent runs itself.

The OpenAI function definition is built from the signature and docstring by the same code
as the gateway's `@tool` (`tools.describe_function`), so both describe a function alike.
Arguments the model sends are checked against that schema first: a misfit goes back to
the model as an `INVALID_ARGUMENTS` envelope with a hint per field, like a gateway tool's.
The function may be sync or async.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any, overload

from agents.agent_errors import GatewayCallError
from agents.loop import LocalTool
from tools import ToolArgumentsError, describe_function, validate_arguments


def _build(function: Callable[..., Any], name: str | None, description: str | None) -> LocalTool:
    described = describe_function(function, name=name, description=description)
    if described.context_param is not None:
        raise TypeError(f"local tool {described.name}: a ToolContext exists only on the gateway")
    definition = {
        "type": "function",
        "function": {
            "name": described.name,
            "description": described.description,
            "parameters": described.input_schema,
        },
    }

    async def handler(arguments: dict[str, Any]) -> Any:
        try:
            kwargs = validate_arguments(described.name, described.arguments_model, arguments)
        except ToolArgumentsError as exc:
            raise GatewayCallError(exc.as_serf()) from exc
        result = function(**kwargs)
        return await result if inspect.isawaitable(result) else result

    return LocalTool(definition, handler)


@overload
def local_tool(function: Callable[..., Any], /) -> LocalTool: ...
@overload
def local_tool(
    *, name: str | None = None, description: str | None = None
) -> Callable[[Callable[..., Any]], LocalTool]: ...
def local_tool(
    function: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
) -> LocalTool | Callable[[Callable[..., Any]], LocalTool]:
    """Turn a typed function into a `LocalTool` (put it in `Agent(local_tools=[...])`)."""

    def build(fn: Callable[..., Any]) -> LocalTool:
        return _build(fn, name, description)

    return build(function) if function is not None else build

"""`@tool`'s declarations (issue 43): the standard library's answer for a call of plain
arguments and for a result's wrapping is pydantic's, so the sandbox's runner can skip
pydantic for such tools and a user sees the same answer either way.

Each case is checked against the built tool (pydantic): the same coerced arguments or the
same refusal, the same wire result.
"""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from typing import Any, Optional, TypedDict

import pytest
from typing_extensions import TypedDict as ExtendedTypedDict

from protocol import ToolContext
from tools import ToolArgumentsError, default_registry, output_schema_of
from tools.tool_declaration import ToolDeclaration, call_tool, declared_at, declaring_into, tool


def _declared(function: Any) -> ToolDeclaration:
    found: list[ToolDeclaration] = []
    with declaring_into(found):
        tool(function)
    return found[0]


def plain(text: str, count: int, ratio: float = 0.5, flag: bool | None = None) -> str:
    """Plain arguments."""
    return f"{text}{count}{ratio}{flag}"


def anything(value: Any, maybe: Optional[str] = None) -> Any:  # noqa: UP045 (typing's spelling)
    """Any value."""
    return value


ARGUMENTS = [
    {"text": "a", "count": 1},
    {"text": "a", "count": 1, "ratio": 2.5, "flag": True},
    {"text": "a", "count": 1, "flag": None},
    {"text": "a", "count": "1"},  # coerced by pydantic
    {"text": "a", "count": 1, "ratio": 2},  # an int for a float: pydantic makes it 2.0
    {"text": "a", "count": True},
    {"text": 5, "count": 1},
    {"text": "a"},
    {"text": "a", "count": 1, "extra": 1},
    {"count": 1.5, "text": "a"},
]


@pytest.mark.parametrize("arguments", ARGUMENTS)
def test_plain_arguments_get_pydantics_answer(arguments: dict[str, Any]) -> None:
    declaration = _declared(plain)
    assert declaration.plain_call is not None  # the runner calls it without pydantic
    built = declaration.registered
    try:
        expected: Any = built.function(**built.validate(arguments))
    except ToolArgumentsError as refused:
        expected = refused.hints
    try:
        got: Any = declaration.invoke(arguments)
    except ToolArgumentsError as refused:
        got = refused.hints
    assert got == expected
    if (accepted := declaration.plain_call.accept(arguments)) is not None:
        assert accepted == built.validate(arguments)  # same values, same types
        assert {k: type(v) for k, v in accepted.items()} == {
            k: type(v) for k, v in built.validate(arguments).items()
        }


class Shape(TypedDict):
    side: int


class ExtendedShape(ExtendedTypedDict):
    side: int


@dataclass
class Box:
    side: int


RETURNS: list[Any] = [
    str,
    int,
    float,
    bool,
    None,
    Any,
    list[str],
    tuple[int, ...],
    list,
    dict,
    dict[str, Any],
    Box,
]


@pytest.mark.parametrize("annotation", [Shape, ExtendedShape])
def test_a_typed_dicts_wrapping_is_left_to_pydantic(annotation: Any) -> None:
    def returns() -> None:
        """A result."""

    returns.__annotations__["return"] = annotation
    declaration = _declared(returns)
    assert declaration.plain_wraps is None
    assert declaration.output_of({"side": 1}) == declaration.registered.output_of({"side": 1})


@pytest.mark.parametrize("annotation", RETURNS)
def test_a_results_wrapping_is_the_output_schemas(annotation: Any) -> None:
    def returns() -> None:
        """A result."""

    returns.__annotations__["return"] = annotation
    assert _declared(returns).plain_wraps == output_schema_of(annotation)[1]


def test_a_tool_taking_a_context_or_a_model_goes_through_pydantic() -> None:
    def who(ctx: ToolContext, name: str) -> dict[str, Any]:
        """Who calls."""
        return {"agent": ctx.principal.agent, "name": name}

    declaration = _declared(who)
    assert declaration.plain_call is None
    context = {
        "principal": {"tenant": "t", "agent": "a", "expires_at": 1, "token_id": "x"},
        "session_id": "s",
        "trace_id": "0" * 32,
        "traceparent": "00-" + "0" * 51,
    }
    assert call_tool(declaration, {"name": "n"}, context, None) == {"agent": "a", "name": "n"}
    with pytest.raises(ToolArgumentsError):  # the context is injected, never an argument
        call_tool(declaration, {"name": "n", "ctx": context}, context, None)


def test_anything_goes_as_it_is() -> None:
    declaration = _declared(anything)
    assert declaration.plain_call is not None
    assert declaration.invoke({"value": [1, {"a": 2}]}) == [1, {"a": 2}]
    assert declaration.output_of([1]) == declaration.registered.output_of([1])


def test_the_default_registry_serves_what_tool_declared() -> None:
    echo = declared_at("tools.builtin:echo")
    assert echo is not None and default_registry.get("echo") is echo.registered
    run = default_registry.get("run_python")
    assert run is not None and run.spec.output_schema is not None
    assert run.spec.output_schema["required"] == ["stdout", "stderr", "return_value"]
    assert run.spec.intent.memory_mb == 256  # declared as a mapping of its fields


def test_importing_the_tools_package_loads_no_pydantic() -> None:
    code = (
        "import sys, tools, tools.builtin\n"
        "tops = {m.partition('.')[0] for m in sys.modules}\n"
        "print(sorted(tops - sys.stdlib_module_names - {'tools', '_distutils_hack', '__main__'}))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"

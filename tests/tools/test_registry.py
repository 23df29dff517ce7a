from __future__ import annotations

import pytest

from protocol import ResourceIntent, ToolContext
from tools import ToolArgumentsError, ToolRegistry, default_registry, tool


def test_builtins_are_registered_with_schemas() -> None:
    names = {t.name for t in default_registry}
    assert {"echo", "run_python", "run_shell", "read_file", "write_file"} <= names
    schema = default_registry.get("write_file").spec.input_schema  # type: ignore[union-attr]
    assert schema["required"] == ["path", "content"]
    assert schema["properties"]["content"]["type"] == "string"


def test_signature_docstring_and_intent_make_the_spec() -> None:
    registry = ToolRegistry()

    @tool(registry=registry, intent=ResourceIntent(memory_mb=32), idempotent=True)
    def add(a: int, b: int = 2, ctx: ToolContext | None = None) -> int:
        """Add two numbers."""
        return a + b

    registered = registry.get("add")
    assert registered is not None
    assert registered.spec.description == "Add two numbers."
    assert registered.spec.intent.memory_mb == 32 and registered.spec.idempotent
    assert set(registered.spec.input_schema["properties"]) == {"a", "b"}
    assert registered.invoke({"a": 1}) == 3


def test_context_parameter_is_injected_not_taken_from_arguments() -> None:
    registry = ToolRegistry()
    seen: list[object] = []

    @tool(registry=registry)
    def who(ctx: ToolContext) -> None:
        seen.append(ctx)

    registered = registry.get("who")
    assert registered is not None
    assert registered.spec.input_schema.get("properties", {}) == {}
    with pytest.raises(ToolArgumentsError):
        registered.invoke({"ctx": {"principal": "forged"}})


def test_wrong_argument_types_give_hints() -> None:
    echo = default_registry.get("echo")
    assert echo is not None
    with pytest.raises(ToolArgumentsError) as info:
        echo.validate({"message": 5})
    assert "message" in info.value.hints
    with pytest.raises(ToolArgumentsError) as info:
        echo.validate({})
    assert info.value.hints == {"message": "Field required"}

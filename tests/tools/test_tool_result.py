"""A Python tool's return value as MCP content, the FastMCP way, and the runner's wire form
checked on the host (tool code can write its own frame)."""

from __future__ import annotations

from typing import Any

import pytest

from protocol import EmbeddedResource, ResourceContents, TextContent
from tools import Audio, Image, ToolResult, ToolResultError, output_schema_of, result_of


def test_a_mapping_is_its_own_structured_content_and_a_plain_value_is_wrapped() -> None:
    mapping = result_of({"a": 1}, wraps=False)
    assert mapping.content == [{"type": "text", "text": '{"a": 1}'}]
    assert mapping.structured == {"a": 1} and mapping.value == {"a": 1}
    number = result_of(7, wraps=True)
    assert number.structured == {"result": 7} and number.value == 7
    text = result_of("hi", wraps=True)
    assert text.content == [{"type": "text", "text": "hi"}] and text.value == "hi"


def test_content_blocks_are_the_content_and_survive_the_wire() -> None:
    blocks: list[Any] = [
        TextContent(text="see"),
        Image(b"\x89PNG", "image/png"),
        Audio("UklGRg==", "audio/wav"),
        EmbeddedResource(resource=ResourceContents(uri="notes://a", text="alpha")),
    ]
    result = result_of(blocks, wraps=True)
    assert [b["type"] for b in result.content] == ["text", "image", "audio", "resource"]
    assert result.content[1] == {"type": "image", "data": "iVBORw==", "mimeType": "image/png"}
    assert result.structured is None
    assert ToolResult.from_wire(result.to_wire()) == result


def test_output_schemas_follow_the_return_annotation() -> None:
    assert output_schema_of(dict[str, int]) == (
        {"type": "object", "additionalProperties": {"type": "integer"}},
        False,
    )
    wrapped, wraps = output_schema_of(list[str])
    assert wraps and wrapped is not None and wrapped["required"] == ["result"]
    assert output_schema_of(Image) == (None, False)
    assert output_schema_of(list[TextContent | Image]) == (None, False)


@pytest.mark.parametrize(
    "wire",
    [
        "not an object",
        {"content": "text"},
        {"content": [{"type": "video", "data": "x"}]},
        {"content": [], "structuredContent": [1]},
        {"content": [], "_meta": "x"},
    ],
)
def test_a_result_that_is_not_mcp_content_is_refused(wire: Any) -> None:
    with pytest.raises(ToolResultError):
        ToolResult.from_wire(wire)

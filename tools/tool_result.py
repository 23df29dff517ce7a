"""`ToolResult`: what a successful call gives back, as MCP content, through every executor.

A result is MCP's `CallToolResult` without `isError`: a list of content blocks (plain JSON
objects, passed on unchanged: an image stays an image), `structuredContent` when the tool has
one, and the tool's `_meta`. `value` is what the REST API's `result` field shows: the
structured value (unwrapped when `wrapped`), else the text, else the blocks.

A Python tool's return value becomes one here (`result_of`), the way FastMCP does it: a
mapping is its own structured content with its JSON as text; any other value is wrapped as
`{"result": value}` (the tool's `outputSchema` says so), with the value's text; a dataclass is
a mapping of its fields; content blocks
(`tools.Image`, `tools.Audio`, protocol's block models, or a list of them) are the content
itself. The sandbox runner carries the result as plain JSON (`to_wire`, `from_wire`): both
ends use this module, the runner only forwards the object.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from dataclasses import dataclass, field
from typing import Any

# The wire form's fields (MCP's names), and ours: whether `structuredContent` wraps a value.
_CONTENT = "content"
_STRUCTURED = "structuredContent"
_META = "_meta"
_WRAPPED = "wrapped"
# Where a failed call's SERF envelope keeps the content an MCP server answered with its
# `isError` result, so the client still sees it (`details[FAILED_CONTENT]`).
FAILED_CONTENT = "content"
_BLOCK_TYPES = frozenset({"text", "image", "audio", "resource", "resource_link"})


class ToolResultError(ValueError):
    """A result that is not MCP content (tool code can write its own frame)."""


@dataclass(frozen=True)
class ToolResult:
    content: list[dict[str, Any]]
    structured: dict[str, Any] | None = None
    meta: dict[str, Any] | None = None
    wrapped: bool = False  # `structured` is {"result": value}, wrapped by the tool's schema
    _value: Any = field(default=None, repr=False, compare=False)

    @property
    def value(self) -> Any:
        if self._value is not None:
            return self._value
        if self.structured is not None:
            return self.structured.get("result") if self.wrapped else self.structured
        if all(block.get("type") == "text" for block in self.content):
            return "\n".join(str(block.get("text", "")) for block in self.content)
        return self.content

    @classmethod
    def of_mcp(cls, result: dict[str, Any], *, value: Any = None) -> ToolResult:
        """An MCP server's `CallToolResult` as it came (`value`: what REST shows of it)."""
        content = result.get(_CONTENT)
        structured = result.get(_STRUCTURED)
        meta = result.get(_META)
        return cls(
            content=[b for b in content if isinstance(b, dict)]
            if isinstance(content, list)
            else [],
            structured=structured if isinstance(structured, dict) else None,
            meta=meta if isinstance(meta, dict) else None,
            _value=value,
        )

    def to_wire(self) -> dict[str, Any]:
        wire: dict[str, Any] = {_CONTENT: self.content}
        if self.structured is not None:
            wire[_STRUCTURED] = self.structured
        if self.meta is not None:
            wire[_META] = self.meta
        if self.wrapped:
            wire[_WRAPPED] = True
        return wire

    @classmethod
    def from_wire(cls, wire: Any) -> ToolResult:
        """The result a sandbox sent, checked: ToolResultError if it is not MCP content."""
        if not isinstance(wire, dict):
            raise ToolResultError("the result is not an object")
        content = wire.get(_CONTENT)
        if not isinstance(content, list) or not all(_is_block(b) for b in content):
            raise ToolResultError(
                "content must be a list of MCP content blocks (objects with a known type)"
            )
        structured = wire.get(_STRUCTURED)
        meta = wire.get(_META)
        if structured is not None and not isinstance(structured, dict):
            raise ToolResultError("structuredContent must be an object")
        if meta is not None and not isinstance(meta, dict):
            raise ToolResultError("_meta must be an object")
        wrapped = wire.get(_WRAPPED) is True and structured is not None
        return cls(content, structured, meta, wrapped)


def result_of(value: Any, *, wraps: bool) -> ToolResult:
    """A Python tool's return value as MCP content; `wraps`: its schema wraps the value."""
    model = _model_class()
    if model is not None:
        blocks = _blocks(value, model)
        if blocks is not None:
            return ToolResult(blocks)
        if isinstance(value, model):
            value = value.model_dump(mode="json")
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        value = dataclasses.asdict(value)
    if isinstance(value, dict) and not wraps:
        return ToolResult([_text(value)], value)
    return ToolResult([_text(value)], {"result": value}, wrapped=True)


def _text(value: Any) -> dict[str, Any]:
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return {"type": "text", "text": text}


def _model_class() -> Any:
    """pydantic's `BaseModel` when pydantic is loaded, else None: a value can be a model only
    once pydantic is imported, and the sandbox's runner does not import it for plain tools."""
    pydantic = sys.modules.get("pydantic")
    return None if pydantic is None else pydantic.BaseModel


def _blocks(value: Any, model: Any) -> list[dict[str, Any]] | None:
    """The content blocks `value` is (one block, or a non-empty list of only blocks)."""
    if _is_block_model(value, model):
        values = [value]
    elif isinstance(value, list | tuple) and value:
        values = list(value)
        if not all(_is_block_model(v, model) for v in values):
            return None
    else:
        return None
    from protocol import content_json  # loaded with the models themselves

    return [content_json(v) for v in values]


def _is_block_model(value: Any, model: Any) -> bool:
    return isinstance(value, model) and getattr(value, "type", None) in _BLOCK_TYPES


def _is_block(block: Any) -> bool:
    return isinstance(block, dict) and block.get("type") in _BLOCK_TYPES

"""MCP content blocks and tool annotations: what a tool's result and its listing carry.

A result is a list of content blocks (text, image, audio, an embedded resource, a resource
link) and, for a tool that declares an `outputSchema`, `structuredContent`. Every model keeps
fields it does not name (`extra="allow"`): a block's `annotations` and `_meta`, and whatever
a newer revision adds, pass through unchanged. Field names are MCP's own spelling.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field


class _Block(BaseModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True)

    annotations: dict[str, Any] | None = None
    meta: dict[str, Any] | None = Field(default=None, alias="_meta")


class TextContent(_Block):
    type: Literal["text"] = "text"
    text: str


class ImageContent(_Block):
    type: Literal["image"] = "image"
    data: str  # base64
    mimeType: str


class AudioContent(_Block):
    type: Literal["audio"] = "audio"
    data: str  # base64
    mimeType: str


class ResourceContents(BaseModel):
    """A resource's contents: `text`, or `blob` (base64)."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)

    uri: str
    mimeType: str | None = None
    text: str | None = None
    blob: str | None = None
    meta: dict[str, Any] | None = Field(default=None, alias="_meta")


class EmbeddedResource(_Block):
    type: Literal["resource"] = "resource"
    resource: ResourceContents


class ResourceLink(_Block):
    type: Literal["resource_link"] = "resource_link"
    uri: str
    name: str
    title: str | None = None
    description: str | None = None
    mimeType: str | None = None
    size: int | None = None


ContentBlock = Annotated[
    TextContent | ImageContent | AudioContent | EmbeddedResource | ResourceLink,
    Field(discriminator="type"),
]


def content_json(block: BaseModel) -> dict[str, Any]:
    """A content block as it goes on the wire: MCP's names, unset fields left out."""
    return block.model_dump(mode="json", by_alias=True, exclude_none=True)


class ToolAnnotations(BaseModel):
    """Hints a client may show or act on (MCP's `ToolAnnotations`); none is a guarantee."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)

    title: str | None = None
    read_only: bool | None = Field(default=None, alias="readOnlyHint")
    destructive: bool | None = Field(default=None, alias="destructiveHint")
    idempotent: bool | None = Field(default=None, alias="idempotentHint")
    open_world: bool | None = Field(default=None, alias="openWorldHint")

    def as_mcp(self) -> dict[str, Any]:
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)

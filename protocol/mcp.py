"""The MCP messages the gateway speaks: initialize, tools/list and tools/call."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from protocol.content import ContentBlock, ToolAnnotations

PROTOCOL_VERSION = "2025-06-18"


class McpTool(BaseModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True)

    name: str
    description: str | None = None
    input_schema: dict[str, Any] = Field(alias="inputSchema")
    title: str | None = None
    output_schema: dict[str, Any] | None = Field(default=None, alias="outputSchema")
    annotations: ToolAnnotations | None = None
    icons: list[dict[str, Any]] | None = None
    meta: dict[str, Any] | None = Field(default=None, alias="_meta")


class ListToolsResult(BaseModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True)

    tools: list[McpTool]
    next_cursor: str | None = Field(default=None, alias="nextCursor")


class CallToolParams(BaseModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True)

    name: str = Field(min_length=1)
    arguments: dict[str, Any] = Field(default_factory=dict)
    meta: dict[str, Any] | None = Field(default=None, alias="_meta")


class CallToolResult(BaseModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True)

    content: list[ContentBlock]
    structured_content: dict[str, Any] | None = Field(default=None, alias="structuredContent")
    is_error: bool = Field(default=False, alias="isError")
    meta: dict[str, Any] | None = Field(default=None, alias="_meta")


class Implementation(BaseModel):
    model_config = ConfigDict(extra="allow")

    name: str
    version: str


class InitializeResult(BaseModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True)

    protocol_version: str = Field(default=PROTOCOL_VERSION, alias="protocolVersion")
    capabilities: dict[str, Any] = Field(default_factory=lambda: {"tools": {"listChanged": False}})
    server_info: Implementation = Field(
        default=Implementation(name="conclave", version="0.1.0"), alias="serverInfo"
    )

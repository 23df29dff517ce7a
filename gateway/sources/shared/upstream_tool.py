"""`UpstreamTool`: a tool as an MCP server's `tools/list` declares it, for both remote kinds
(`mcp_http`, `mcp_stdio`). Every field MCP defines is kept as the server sent it (title,
output schema, annotations, icons, `_meta`), so `/mcp` lists the tool as its server does;
and `tool_error`, the SERF envelope of a call the server answered `isError: true`."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from protocol import ErrorCode, ResourceIntent, SerfError, ToolAnnotations, ToolSpec
from tools import FAILED_CONTENT


class UpstreamTool(BaseModel):
    """A tool as the upstream's `tools/list` declares it (what the gateway serves of it: all
    of MCP's fields, kept as they came)."""

    model_config = ConfigDict(extra="ignore", populate_by_name=True)

    name: str
    title: str | None = None
    description: str | None = None
    input_schema: dict[str, Any] = Field(alias="inputSchema")
    output_schema: dict[str, Any] | None = Field(default=None, alias="outputSchema")
    annotations: dict[str, Any] | None = None
    icons: list[dict[str, Any]] | None = None
    meta: dict[str, Any] | None = Field(default=None, alias="_meta")

    @property
    def idempotent(self) -> bool:
        return bool((self.annotations or {}).get("idempotentHint"))

    def spec(self, name: str, intent: ResourceIntent) -> ToolSpec:
        """The gateway's spec of the tool, served as `name`."""
        return ToolSpec(
            name=name,
            title=self.title,
            description=self.description or "",
            input_schema=self.input_schema,
            output_schema=self.output_schema,
            intent=intent,
            idempotent=self.idempotent,
            annotations=_annotations(self.annotations),
            icons=self.icons,
            meta=self.meta,
        )


def _annotations(declared: dict[str, Any] | None) -> ToolAnnotations | None:
    """The upstream's annotations, or none when they are not MCP's (a hint that is not a
    boolean): a client is better told nothing than something wrong."""
    if declared is None:
        return None
    try:
        return ToolAnnotations.model_validate(declared)
    except ValidationError:
        return None


def tool_error(source: str, tool: str, result: dict[str, Any], kind: str = "upstream") -> SerfError:
    """The upstream tool's own failure (its result had `isError: true`): its text in the
    message, its content blocks kept as they came in `details` (`tools.FAILED_CONTENT`)."""
    content = result.get("content")
    blocks = [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []
    text = "\n".join(str(b.get("text", "")) for b in blocks if b.get("type") == "text")
    return SerfError.of(
        ErrorCode.TOOL_FAILED,
        f"{tool} failed on {kind} {source!r}: {text[:500]}",
        details={kind: source, FAILED_CONTENT: blocks},
    )

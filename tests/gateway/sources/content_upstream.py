"""A FastMCP server whose tools answer every kind of MCP content, for the content tests.

Run as a script (`python content_upstream.py --port N`), in its own process. Each tool's
answer is fixed, so a test can compare what reaches a client through Conclave with it:
`picture` (an image), `sound` (audio), `document` (an embedded resource), `link` (a resource
link), `mixed` (text, image and a link, with `_meta`), `forecast` (structured output with an
`outputSchema`, a title, annotations, icons and `_meta` in its listing), `broken` (an
`isError` result carrying an image).
"""

from __future__ import annotations

import argparse
from typing import Any

import uvicorn
from fastmcp import FastMCP
from fastmcp.tools import ToolResult
from mcp import types

PNG = (  # one pixel
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGNgYGD4"
    "DwABBAEAcCBlCwAAAABJRU5ErkJggg=="
)
WAV = "UklGRiQAAABXQVZFZm10IBAAAAABAAEAQB8AAIA+AAACABAAZGF0YQAAAAA="
ICON = {"src": "https://example.com/forecast.png", "mimeType": "image/png", "sizes": ["48x48"]}
FORECAST_SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "celsius": {"type": "number"}},
    "required": ["city", "celsius"],
}
IMAGE = types.ImageContent(
    type="image", data=PNG, mimeType="image/png", annotations=types.Annotations(priority=0.5)
)
LINK = types.ResourceLink(
    type="resource_link",
    uri="file:///reports/q3.pdf",
    name="q3",
    title="Q3 report",
    mimeType="application/pdf",
    size=1234,
)


def build_app() -> Any:
    server = FastMCP("content")

    @server.tool
    def picture() -> list[types.ContentBlock]:
        """A one-pixel PNG."""
        return [IMAGE]

    @server.tool
    def sound() -> list[types.ContentBlock]:
        """A silent WAV."""
        return [types.AudioContent(type="audio", data=WAV, mimeType="audio/wav")]

    @server.tool
    def document() -> list[types.ContentBlock]:
        """An embedded text resource and an embedded blob."""
        text = types.TextResourceContents(uri="notes://a", mimeType="text/plain", text="alpha")
        blob = types.BlobResourceContents(uri="notes://b", mimeType="image/png", blob=PNG)
        return [
            types.EmbeddedResource(type="resource", resource=text),
            types.EmbeddedResource(type="resource", resource=blob),
        ]

    @server.tool
    def link() -> list[types.ContentBlock]:
        """A link to a resource, not its contents."""
        return [LINK]

    @server.tool
    def mixed() -> ToolResult:
        """Text, an image and a link, with the server's own `_meta`."""
        content = [types.TextContent(type="text", text="three blocks"), IMAGE, LINK]
        return ToolResult(content=content, meta={"example.com/page": 2})

    @server.tool(
        title="Weather forecast",
        icons=[types.Icon(**ICON)],  # type: ignore[arg-type]
        annotations=types.ToolAnnotations(readOnlyHint=True, openWorldHint=True),
        meta={"example.com/owner": "weather-team"},
        output_schema=FORECAST_SCHEMA,
    )
    def forecast(city: str) -> dict[str, Any]:
        """Tomorrow's temperature in `city`."""
        return {"city": city, "celsius": 21.5}

    @server.tool
    def broken() -> ToolResult:
        """A tool error that carries an image of what went wrong."""
        text = types.TextContent(type="text", text="the camera jammed")
        return ToolResult(content=[text, IMAGE], is_error=True)

    return server.http_app(path="/mcp", json_response=True, stateless_http=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, required=True)
    port = parser.parse_args().port
    uvicorn.run(build_app(), host="127.0.0.1", port=port, log_level="warning")


if __name__ == "__main__":
    main()

"""Test tools that answer MCP content rather than a value: a picture a model sees as an image.

Not served unless `tools.harness.media` is listed in `CONCLAVE_TOOL_MODULES`. They run in the
sandbox like any tool; what they return crosses the runner's wire as MCP content blocks.
"""

from __future__ import annotations

import base64

from protocol import ResourceIntent, ResourceLink, TextContent
from tools.media_content import Image
from tools.registry import tool

# A one-pixel PNG.
PIXEL_PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGNgYGD4DwABBAEAcCBlCwAAAABJRU5ErkJggg=="
)
_SMALL = ResourceIntent(memory_mb=64, cpu_seconds=2, timeout_ms=5_000)


@tool(read_only=True, idempotent=True, intent=_SMALL)
def snapshot(caption: str) -> list[TextContent | Image]:
    """A one-pixel picture with its caption."""
    return [TextContent(text=caption), Image(PIXEL_PNG, "image/png")]


@tool(read_only=True, idempotent=True, intent=_SMALL)
def report_link(quarter: int) -> ResourceLink:
    """A link to a quarter's report, not its contents."""
    return ResourceLink(uri=f"file:///reports/q{quarter}.pdf", name=f"q{quarter}")

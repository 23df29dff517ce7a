"""Content a tool can return besides a value: `Image` and `Audio` reach the client as MCP
image and audio blocks (a picture a model sees, not base64 in a text it pays tokens for).

    @tool
    def chart(points: list[float]) -> Image:
        return Image(render_png(points), "image/png")

A tool may also return protocol's block models (`EmbeddedResource`, `ResourceLink`,
`TextContent`) or a list mixing any of them.
"""

from __future__ import annotations

import base64
from typing import Any

from protocol import AudioContent, ImageContent


def _base64(data: bytes | str) -> str:
    return base64.b64encode(data).decode("ascii") if isinstance(data, bytes) else data


class Image(ImageContent):
    """An image block: raw bytes (encoded here) or base64 text, and its MIME type."""

    def __init__(self, data: bytes | str, mime_type: str = "image/png", **extra: Any) -> None:
        super().__init__(data=_base64(data), mimeType=mime_type, **extra)


class Audio(AudioContent):
    """An audio block: raw bytes (encoded here) or base64 text, and its MIME type."""

    def __init__(self, data: bytes | str, mime_type: str = "audio/wav", **extra: Any) -> None:
        super().__init__(data=_base64(data), mimeType=mime_type, **extra)

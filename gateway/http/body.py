"""Reading a request body under the size limit: the declared length first, then what arrives."""

from __future__ import annotations

from fastapi import Request

from gateway.gateway_error import GatewayError
from protocol import ErrorCode


def _too_large(limit: int) -> GatewayError:
    return GatewayError.of(
        ErrorCode.PAYLOAD_TOO_LARGE,
        f"the request body is over the gateway's limit of {limit} bytes; send less"
        " (large inputs belong in a file in the workspace)",
        details={"max_body_bytes": limit},
    )


async def read_body(request: Request, limit: int) -> bytes:
    """The whole body, or PAYLOAD_TOO_LARGE as soon as it is known to be over `limit`."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise _too_large(limit)
    chunks: list[bytes] = []
    received = 0
    async for chunk in request.stream():
        received += len(chunk)
        if received > limit:  # a lying or absent Content-Length (chunked uploads)
            raise _too_large(limit)
        chunks.append(chunk)
    return b"".join(chunks)

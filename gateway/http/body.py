"""Reading a request body under the gateway's limits: its size (the declared length first, then
what arrives) and how deeply its JSON nests; and, before a body that may be large is read,
what the headers already refuse (`refuse_before_body`, `gateway.pipeline.header_check`).

Every body the gateway reads is JSON, and a parser walks nesting by recursion: a few hundred
kilobytes of `[` would exhaust Python's stack (a 500) or reach the tool's own decoder. A body
nesting deeper than `MAX_JSON_DEPTH` is refused as PARSE_ERROR before anything parses it.

Being JSON whatever its Content-Type says, a body needs none: `curl -d '{...}'` sends
`application/x-www-form-urlencoded`, and FastAPI reads only a JSON content type as JSON.
`as_json_body` marks a request's body as JSON before FastAPI sees it (the hot routes never
read the header). FastAPI refuses such bodies to stop a browser's cross-site "simple"
request; here that protects nothing, as every route that reads a body needs a bearer token
or the admin key header, which a browser sends cross-site only after a CORS preflight the
gateway never grants.
"""

from __future__ import annotations

import re
from array import array
from itertools import accumulate

from fastapi import Request
from starlette.requests import ClientDisconnect
from starlette.types import Scope

from gateway.gateway_error import GatewayError
from gateway.http.gateway_parts import gateway_parts
from gateway.pipeline import HeaderCheck
from protocol import ErrorCode

MAX_JSON_DEPTH = 64
_JSON_TYPE = (b"content-type", b"application/json")

_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)  # brackets inside strings do not nest
_NOT_BRACKET = bytes(b for b in range(256) if b not in b"[]{}")
_STEP = bytes.maketrans(b"[{]}", b"\x01\x01\xff\xff")  # +1 opens, -1 (signed) closes


def _too_large(limit: int) -> GatewayError:
    return GatewayError.of(
        ErrorCode.PAYLOAD_TOO_LARGE,
        f"the request body is over the gateway's limit of {limit} bytes; send less"
        " (large inputs belong in a file in the workspace)",
        details={"max_body_bytes": limit},
    )


def json_depth(body: bytes) -> int:
    """How deeply the arrays and objects of the JSON text `body` nest (0 for a scalar)."""
    brackets = _STRING.sub(b"", body).translate(None, _NOT_BRACKET).translate(_STEP)
    return max(accumulate(array("b", brackets)), default=0)


def check_json_depth(body: bytes, limit: int = MAX_JSON_DEPTH) -> None:
    """PARSE_ERROR when `body` nests deeper than `limit`."""
    # Cheap for every ordinary body: fewer brackets than the limit cannot nest past it.
    if body.count(b"[") + body.count(b"{") <= limit:
        return
    if json_depth(body) > limit:
        raise GatewayError.of(
            ErrorCode.PARSE_ERROR,
            f"the request body's JSON nests deeper than {limit} levels; flatten it",
            details={"max_json_depth": limit},
        )


async def read_body(request: Request, limit: int) -> bytes:
    """The whole body, or PAYLOAD_TOO_LARGE as soon as it is known to be over `limit`, or
    PARSE_ERROR when its JSON nests deeper than `MAX_JSON_DEPTH`, or CANCELLED when the client
    went away before all of it came."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise _too_large(limit)
    chunks: list[bytes] = []
    received = 0
    try:
        async for chunk in request.stream():
            received += len(chunk)
            if received > limit:  # a lying or absent Content-Length (chunked uploads)
                raise _too_large(limit)
            chunks.append(chunk)
    except ClientDisconnect as exc:  # gone mid-body (a worker killed as it wrote)
        raise GatewayError.of(
            ErrorCode.CANCELLED, "the client closed its connection before its body arrived"
        ) from exc
    body = b"".join(chunks)
    check_json_depth(body)
    return body


async def refuse_before_body(request: Request, target: str, limit: int) -> None:
    """Raise what the request's headers already refuse (no token or a bad one, a revoked
    agent, a caller over its rate for `target`, a tenant over its rate of large bodies) when
    its body may be large: it is then never read. `limit`: the route's `max_body_bytes`."""
    check: HeaderCheck = gateway_parts(request.app).header_check
    if not check.wanted(request.headers):
        return
    declared = request.headers.get("content-length", "")
    size = min(int(declared), limit) if declared.isdigit() else limit
    if refused := await check.refusal(request.headers, target, size):
        raise refused


def as_json_body(scope: Scope) -> None:
    """Make the request's `Content-Type` JSON in `scope`, unless it already says JSON, or the
    request is A2A's: its routes read their bodies themselves, and its JSON-RPC binding
    answers a body declared as something else ContentTypeNotSupportedError."""
    if scope["path"].startswith("/a2a/"):
        return
    headers: list[tuple[bytes, bytes]] = scope["headers"]
    for name, value in headers:
        if name == b"content-type" and b"json" in value.lower():
            return
    scope["headers"] = [(k, v) for k, v in headers if k != b"content-type"] + [_JSON_TYPE]

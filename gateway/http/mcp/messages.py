"""Reading one MCP message off the wire and turning pipeline outcomes back into MCP.

Protocol errors are JSON-RPC errors with the SERF envelope in `data`; a tool's failure (a
tool the caller may not call or that is not served, a refusal by the budget or dispatch
stage, or the tool's own error) is a `CallToolResult` with `isError: true` and the envelope
in `structuredContent`, so a model sees it and can recover.

A JSON-RPC answer travels with HTTP 200 (`rpc_status`): a client library reads any other
status as the transport failing, and the `mcp` 1.x client ends its session on one. Only a
missing or bad credential keeps its 401 (the client's cue to authenticate again); a refused
notification, which has no answer to carry an error, keeps its error's status.
Both texts (the error's message, the result's text content) carry the `param_hints`, for a
client that shows a model only text. A tool's result goes out as its content blocks, its
structured content and its `_meta` unchanged (`tools.ToolResult`); the gateway adds its own
`conclave/` keys to `_meta`. An MCP server's own failure keeps the content it answered, after
the envelope's text.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from gateway.gateway_error import GatewayError
from protocol import (
    REQUEST_STATE,
    CallUsage,
    ErrorCategory,
    ErrorCode,
    JsonRpcNotification,
    JsonRpcRequest,
    RequestId,
    SerfError,
    jsonrpc,
)
from tools import FAILED_CONTENT, ToolResult

# The SERF codes that have a JSON-RPC spelling of their own; the rest are SERVER_ERROR.
_RPC_CODES = {
    ErrorCode.PARSE_ERROR: jsonrpc.PARSE_ERROR,
    ErrorCode.INVALID_REQUEST: jsonrpc.INVALID_REQUEST,
    ErrorCode.PAYLOAD_TOO_LARGE: jsonrpc.INVALID_REQUEST,
    ErrorCode.METHOD_NOT_FOUND: jsonrpc.METHOD_NOT_FOUND,
    ErrorCode.TOOL_NOT_FOUND: jsonrpc.INVALID_PARAMS,
    ErrorCode.NOT_FOUND: jsonrpc.INVALID_PARAMS,
    ErrorCode.TOOL_NOT_ALLOWED: jsonrpc.INVALID_PARAMS,
    ErrorCode.INTERNAL: jsonrpc.INTERNAL_ERROR,
}
TOOL_FAILURE_STAGES = ("budget", "dispatch")
ERROR_META = "conclave/error"  # where a tool error's SERF envelope always is, in `_meta`
# The tool named is not one the caller may call: the model picked a wrong tool, a tool error.
_REFUSED_TOOL = (ErrorCode.TOOL_NOT_FOUND, ErrorCode.TOOL_NOT_ALLOWED)


def is_tool_failure(error: SerfError, stage: str | None) -> bool:
    """A failure the model should see as the tool's (isError), not the protocol's.

    A revoked token's call is one too: its signature is good, so it is no bad credential
    but a refusal of this agent's calls from now on, and a client that ends its session on a
    401 (the `mcp` 1.x client, which LangGraph's adapters use) would take the agent's whole
    run down with it; as a tool error the run sees it and stops or replans."""
    if error.code is ErrorCode.AUTH_REVOKED:
        return True
    if error.category is ErrorCategory.AUTH:
        return False
    if error.code is ErrorCode.INVALID_REQUEST and REQUEST_STATE in error.param_hints:
        return False  # a round's requestState the protocol does not take: not the tool's
    return stage in TOOL_FAILURE_STAGES or error.code in _REFUSED_TOOL


def rpc_status(error: SerfError, *, notification: bool = False) -> int:
    """The HTTP status a JSON-RPC error goes with: 200, 401 for the credential."""
    if error.category is ErrorCategory.AUTH or notification:
        return error.http_status
    return 200


@dataclass(frozen=True)
class McpMessage:
    method: str
    id: RequestId | None  # None: a notification, answered with 202
    params: dict[str, Any]


@dataclass(frozen=True)
class McpAnswer:
    """A client's response to a request the gateway sent it (`ClientRequests`)."""

    id: RequestId
    response: dict[str, Any]  # the JSON-RPC response, as it came


def parse_message(body: bytes) -> McpMessage | McpAnswer:
    """The message in `body`: a request or notification, or a client's response."""
    try:
        raw = json.loads(body)
    except (ValueError, UnicodeDecodeError) as exc:
        raise GatewayError.of(ErrorCode.PARSE_ERROR, "the body is not JSON") from exc
    if not isinstance(raw, dict):
        raise GatewayError.of(
            ErrorCode.INVALID_REQUEST, "send one JSON-RPC 2.0 object per POST (no batches)"
        )
    if "method" not in raw and "id" in raw and ("result" in raw or "error" in raw):
        answered = raw["id"]
        if isinstance(answered, int | str) and not isinstance(answered, bool):
            return McpAnswer(answered, raw)
        raise GatewayError.of(
            ErrorCode.INVALID_REQUEST, "a response's id must be the id of the request it answers"
        )
    try:
        if "id" in raw:
            request = JsonRpcRequest.model_validate(raw)
            return McpMessage(request.method, request.id, request.params or {})
        note = JsonRpcNotification.model_validate(raw)
        return McpMessage(note.method, None, note.params or {})
    except ValidationError as exc:
        hints = {".".join(str(p) for p in e["loc"]) or "(message)": e["msg"] for e in exc.errors()}
        raise GatewayError.of(
            ErrorCode.INVALID_REQUEST, "not a JSON-RPC 2.0 request", param_hints=hints
        ) from exc


def request_id_of(body: bytes) -> RequestId | None:
    """The id of a request we refuse to read further, when one can be found."""
    try:
        raw = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return None
    value = raw.get("id") if isinstance(raw, dict) else None
    return value if isinstance(value, int | str) and not isinstance(value, bool) else None


def _described(error: SerfError) -> str:
    """The envelope as one text for a reader that shows only text: code, message, and what
    to fix in each argument (`param_hints`), one line each."""
    hints = "".join(f"\n- {name}: {hint}" for name, hint in error.param_hints.items())
    return f"{error.code}: {error.message}{hints}"


def rpc_error(request_id: RequestId | None, error: SerfError) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "error": {
            "code": _RPC_CODES.get(error.code, jsonrpc.SERVER_ERROR),
            "message": _described(error),
            "data": error.model_dump(mode="json"),
        },
    }


def rpc_result(request_id: RequestId, result: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "result": result}


def _meta(trace_id: str, usage: CallUsage | None) -> dict[str, Any]:
    meta: dict[str, Any] = {"conclave/trace_id": trace_id}
    if usage is not None:
        meta["conclave/usage"] = usage.model_dump(mode="json")
    return meta


def tool_result(result: ToolResult, trace_id: str, usage: CallUsage | None) -> dict[str, Any]:
    answer: dict[str, Any] = {"content": result.content}
    if result.structured is not None:
        answer["structuredContent"] = result.structured
    answer["isError"] = False
    answer["_meta"] = (
        {**result.meta, **_meta(trace_id, usage)} if result.meta else _meta(trace_id, usage)
    )
    return answer


def tool_failure(
    error: SerfError, usage: CallUsage | None, *, output_schema: bool = False
) -> dict[str, Any]:
    """A tool's failure as MCP's tool-execution error: the SERF envelope in `_meta` under
    `conclave/error`, and in `structuredContent` too unless the tool declares an
    `outputSchema` (the spec has every `structuredContent` of such a tool conform to it, and
    the TypeScript SDK and the clients built on it check that even for an error)."""
    envelope = error.model_dump(mode="json")
    kept = envelope["details"].pop(FAILED_CONTENT, None)
    content: list[dict[str, Any]] = [{"type": "text", "text": _described(error)}]
    if isinstance(kept, list):
        content += [block for block in kept if isinstance(block, dict)]
    answer: dict[str, Any] = {"content": content}
    if not output_schema:
        answer["structuredContent"] = envelope
    answer["isError"] = True
    answer["_meta"] = {**_meta(error.trace_id or "", usage), ERROR_META: envelope}
    return answer

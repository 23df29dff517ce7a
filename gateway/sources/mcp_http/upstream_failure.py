"""The one place a remote MCP upstream's failures become SERF envelopes.

- the upstream cannot be reached, answers an HTTP error status (a 5xx, a refused credential,
  an expired session), or has no open session: UPSTREAM_UNAVAILABLE, retryable (it may come
  back);
- it answers something that is not JSON-RPC (garbage): TOOL_FAILED, not retryable (the same
  call would get the same garbage);
- its answer runs past the call's output cap (cut there, the rest never read):
  SANDBOX_OUTPUT_LIMIT, as a tool's result over the cap in a sandbox;
- its JSON-RPC refusal of the arguments (-32602): INVALID_ARGUMENTS; of the tool (-32601):
  TOOL_NOT_FOUND; of a resource it does not have (-32002, the MCP spec's code): NOT_FOUND;
  any other JSON-RPC error (its handler failed: -32603, a server's own code): TOOL_FAILED.
  None is retryable: the upstream is up and refused this request, as it would again;
- the tool's own failure (`isError: true`): TOOL_FAILED, not retryable, with the content the
  upstream answered kept in `details` (`/mcp` shows it to the client unchanged); that one is
  `gateway.sources.shared.upstream_tool.tool_error`, shared with `mcp_stdio`.
Every envelope names the source, so an operator knows which upstream to look at.
"""

from __future__ import annotations

from typing import Any

from gateway.sources.mcp_http.mcp_session import PARSE_ERROR, RpcError, UpstreamHttpError
from gateway.sources.shared import AnswerTooLarge
from protocol import ErrorCode, SerfError

_METHOD_NOT_FOUND = -32601
_INVALID_PARAMS = -32602
_RESOURCE_NOT_FOUND = -32002


# The JSON-RPC errors an upstream answers that say what to do: our code, and what to say
# after "upstream '<source>'" ({} is the upstream's own message, shortened).
_BY_RPC_CODE: dict[int, tuple[ErrorCode, str]] = {
    PARSE_ERROR: (ErrorCode.TOOL_FAILED, "answered with something that is not MCP: {}"),
    _INVALID_PARAMS: (ErrorCode.INVALID_ARGUMENTS, "refused the arguments: {}"),
    _METHOD_NOT_FOUND: (ErrorCode.TOOL_NOT_FOUND, "no longer serves it: {}"),
    _RESOURCE_NOT_FOUND: (
        ErrorCode.NOT_FOUND,
        "has no such resource: {}; resources/list and resources/templates/list name what it serves",
    ),
}


def upstream_failure(source: str, exc: BaseException) -> SerfError:
    """The envelope for an exception raised while talking to upstream `source`."""
    details: dict[str, Any] = {"upstream": source}
    if isinstance(exc, AnswerTooLarge):
        return SerfError.of(
            ErrorCode.SANDBOX_OUTPUT_LIMIT,
            f"upstream {source!r} answered more than the call's limit of {exc.limit} bytes; the"
            " answer was cut there: ask for less output",
            details={**details, "answer_limit_bytes": exc.limit},
        )
    if isinstance(exc, UpstreamHttpError):
        details["http_status"] = exc.status
    if isinstance(exc, RpcError):
        details["rpc_code"] = exc.code
        if (known := _BY_RPC_CODE.get(exc.code)) is not None:
            code, says = known
            return SerfError.of(
                code, f"upstream {source!r} {says.format(_short(exc))}", details=details
            )
        return SerfError.of(
            ErrorCode.TOOL_FAILED,
            f"upstream {source!r} answered JSON-RPC error {exc.code}: {_short(exc)}; the same"
            " request fails again: change it, or ask the upstream's operator",
            details=details,
        )
    return unavailable(source, f"{type(exc).__name__}: {_short(exc)}", details)


def unavailable(source: str, reason: str, details: dict[str, Any] | None = None) -> SerfError:
    """UPSTREAM_UNAVAILABLE: retry later, the upstream may be back."""
    return SerfError.of(
        ErrorCode.UPSTREAM_UNAVAILABLE,
        f"upstream {source!r} is unavailable ({reason}); retry later",
        details=details or {"upstream": source},
    )


def _short(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    first = text.splitlines()[0] if text else text
    return first[:300]

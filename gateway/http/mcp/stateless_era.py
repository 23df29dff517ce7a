"""`/mcp`'s stateless era: the 2026-07-28 revision's wire, decided per request.

What this module implements of MCP 2026-07-28 (spec `docs/specification/2026-07-28`,
`schema/2026-07-28/schema.ts`; conformance 0.2 line, scenarios `server-stateless`,
`http-standard-headers`, `caching`):

- The era: a request whose `params._meta` carries `io.modelcontextprotocol/protocolVersion`,
  or whose `MCP-Protocol-Version` header is 2026-07-28, is on the stateless wire; any other
  message is the handshake era's (`endpoint`), unchanged. No `initialize` is needed: every
  request carries its version and its `io.modelcontextprotocol/clientCapabilities` in `_meta`
  (`clientInfo` is optional).
- Checks, in this order, each HTTP 400: `_meta` missing, or without the version or the
  client capabilities, or a `io.modelcontextprotocol/logLevel` that is no log level: -32602
  (Invalid params); so is a `subscriptions/listen` filter of the wrong shape
  (`subscriptions_listen.filter_problem`). The `MCP-Protocol-Version` header missing or
  naming another version than `_meta`: -32020 (HeaderMismatch). A version not served:
  -32022 (UnsupportedProtocolVersion, `data.supported` and `data.requested`). The `Mcp-Method`
  header missing or not the body's method, or `Mcp-Name` missing or not the body's
  `params.name` (`tools/call`, `prompts/get`) or `params.uri` (`resources/read`): -32020.
  Header names are case-insensitive, values case-sensitive, surrounding whitespace ignored.
- Log messages: a request's `_meta["io.modelcontextprotocol/logLevel"]` is the level of
  the log messages its call's tools and servers send it (on that request's own answer,
  `call_stream`); a request without one is sent none. `logging/setLevel` (the handshake
  era's, kept per identity) does not apply on this wire.
- Client capabilities: a call whose MCP source asks the client for a feature the request
  did not declare (`gateway.sources.shared.client_channel`: sampling, elicitation, roots) is
  answered -32021 (MissingRequiredClientCapability), HTTP 400, with
  `data.requiredCapabilities` naming it (`capability_refusal`).
- Methods: `server/discover` (`discover`), `subscriptions/listen`
  (`subscriptions_listen`), `tools/list`, `tools/call`, `resources/list`,
  `resources/read`, `prompts/list`, `prompts/get`, and `resources/templates/list` (empty
  where the handshake era serves no templates). The methods the revision removed
  (`initialize`, `ping`, `logging/setLevel`, `resources/subscribe`, `resources/unsubscribe`)
  and unknown ones: HTTP 404 with -32601.
- Results: every one carries `resultType: "complete"` and `_meta`'s
  `io.modelcontextprotocol/serverInfo`. Lists, reads and `server/discover` carry
  `ttlMs` and `cacheScope`: always `private` (each answer is the caller's own surface), and
  `ttlMs` = `CACHE_TTL_MS` (5 s). The gateway itself caches none of these: a revocation, a
  policy change or a source's new tool list shows on the next request, so a client that
  honours `ttlMs` sees it within 5 s.

Every message still runs through the pipeline (identity, policy, budgets, audit); a refusal
here is the scope stage's input error, so an unauthenticated request still gets its 401.
Tasks (`tasks/get`, `tasks/update`, `tasks/cancel`, a `tools/call` answered with a task) are
`task_methods`'. Multi round-trip requests: a handshake-era server's request to the client
during a call is turned into `InputRequiredResult`, and a 2026-07-28 server's own is relayed
with its state sealed into the gateway's (`input_rounds`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gateway.gateway_error import GatewayError
from gateway.http.mcp.messages import McpMessage
from protocol import (
    META_CAPABILITIES,
    META_VERSION,
    STATELESS_VERSION,
    ErrorCode,
    LogLevel,
    SerfError,
)

META_SERVER_INFO = "io.modelcontextprotocol/serverInfo"
META_LOG_LEVEL = "io.modelcontextprotocol/logLevel"
_ENVELOPE_PREFIX = "io.modelcontextprotocol/"
SERVER_INFO = {"name": "conclave", "version": "0.1.0"}
# The revision's JSON-RPC error codes (schema.ts).
INVALID_PARAMS = -32602
METHOD_NOT_FOUND = -32601
HEADER_MISMATCH = -32020
MISSING_REQUIRED_CLIENT_CAPABILITY = -32021
UNSUPPORTED_PROTOCOL_VERSION = -32022
REMOVED_METHODS = frozenset(
    ("initialize", "ping", "logging/setLevel", "resources/subscribe", "resources/unsubscribe")
)
CACHEABLE = frozenset(
    (
        "server/discover",
        "tools/list",
        "prompts/list",
        "resources/list",
        "resources/templates/list",
        "resources/read",
    )
)
# How long a client may keep a list or a read: short, so a revoked agent, a changed policy or
# a source's new tools reach a caching client within 5 s (the gateway itself caches none).
CACHE_TTL_MS = 5000
_LEVELS = tuple(level.value for level in LogLevel)
_NAMED_BY = {
    "tools/call": "name",
    "prompts/get": "name",
    "resources/read": "uri",
    # The tasks extension: a task's id names it, so a balancer may route by it.
    "tasks/get": "taskId",
    "tasks/update": "taskId",
    "tasks/cancel": "taskId",
}


@dataclass(frozen=True)
class WireRefusal:
    """A request the stateless wire refuses: the JSON-RPC code and HTTP status the revision
    names, and the SERF envelope that travels in `error.data` as on every refusal."""

    rpc_code: int
    http_status: int
    error: SerfError
    data: dict[str, Any] | None = None  # the revision's own `error.data`, when it names one

    def body(self, request_id: Any) -> dict[str, Any]:
        data = dict(self.error.model_dump(mode="json"))
        data.update(self.data or {})
        message = f"{self.error.code}: {self.error.message}"
        error = {"code": self.rpc_code, "message": message, "data": data}
        return {"jsonrpc": "2.0", "id": request_id, "error": error}


def speaks_stateless(headers: Mapping[str, str], message: McpMessage) -> bool:
    """Whether `message` is on the 2026-07-28 wire (a request, not a notification)."""
    if message.id is None:
        return False
    meta = message.params.get("_meta")
    if isinstance(meta, dict) and META_VERSION in meta:
        return True
    return headers.get("mcp-protocol-version") == STATELESS_VERSION


def _refusal(rpc_code: int, status: int, message: str, **data: Any) -> WireRefusal:
    code = ErrorCode.METHOD_NOT_FOUND if status == 404 else ErrorCode.INVALID_REQUEST
    extra: dict[str, Any] = {"details": dict(data)} if data else {}
    error = GatewayError.of(code, message, **extra).error
    return WireRefusal(rpc_code, status, error, dict(data) if data else None)


def _header(headers: Mapping[str, str], name: str) -> str | None:
    value = headers.get(name)
    return value.strip() if value is not None else None  # RFC 9110: OWS is not the value


def check(
    headers: Mapping[str, str], message: McpMessage, supported: tuple[str, ...]
) -> WireRefusal | None:
    """The revision's refusal of `message`, or None when it may go on."""
    meta = message.params.get("_meta")
    if not isinstance(meta, dict) or META_VERSION not in meta or META_CAPABILITIES not in meta:
        return _refusal(
            INVALID_PARAMS,
            400,
            f"a {STATELESS_VERSION} request carries params._meta with {META_VERSION!r} and"
            f" {META_CAPABILITIES!r}",
        )
    asked = meta[META_VERSION]
    if META_LOG_LEVEL in meta and meta[META_LOG_LEVEL] not in _LEVELS:
        return _refusal(
            INVALID_PARAMS,
            400,
            f"_meta {META_LOG_LEVEL!r} is one of {', '.join(_LEVELS)} (or absent: no log messages)",
        )
    if _header(headers, "mcp-protocol-version") != asked:
        return _refusal(
            HEADER_MISMATCH,
            400,
            f"the MCP-Protocol-Version header must name the version in _meta ({asked!r})",
        )
    if asked != STATELESS_VERSION:
        return _refusal(
            UNSUPPORTED_PROTOCOL_VERSION,
            400,
            f"protocol version {str(asked)[:64]!r} is not served here; send {STATELESS_VERSION}"
            " in _meta, or initialize with a handshake-era version",
            supported=[*supported, STATELESS_VERSION],
            requested=asked,
        )
    if _header(headers, "mcp-method") != message.method:
        return _refusal(
            HEADER_MISMATCH, 400, "the Mcp-Method header must be the body's method, exactly"
        )
    field = _NAMED_BY.get(message.method)
    if field is not None and _header(headers, "mcp-name") != message.params.get(field):
        return _refusal(
            HEADER_MISMATCH, 400, f"the Mcp-Name header must be the body's params.{field}"
        )
    if message.method in REMOVED_METHODS:
        return _refusal(
            METHOD_NOT_FOUND,
            404,
            f"{message.method} is not part of the {STATELESS_VERSION} revision"
            " (no handshake, no sessions): call server/discover, or use the handshake era",
        )
    return None


def log_level(message: McpMessage) -> LogLevel | None:
    """The level of the log messages a (checked) request asked for; None: it asked for none,
    and is sent none (the revision's replacement of `logging/setLevel`). Read before
    `consume_envelope`."""
    meta = message.params.get("_meta")
    asked = meta.get(META_LOG_LEVEL) if isinstance(meta, dict) else None
    return LogLevel(asked) if asked in _LEVELS else None


def client_capabilities(message: McpMessage) -> dict[str, Any]:
    """What a (checked) request declared of its client's features."""
    meta = message.params.get("_meta")
    declared = meta.get(META_CAPABILITIES) if isinstance(meta, dict) else None
    return dict(declared) if isinstance(declared, dict) else {}


def capability_refusal(error: SerfError) -> WireRefusal | None:
    """The revision's answer to a call that needed a client capability its request did not
    declare (`CLIENT_CAPABILITY_MISSING`): -32021, HTTP 400, `data.requiredCapabilities`."""
    if error.code is not ErrorCode.CLIENT_CAPABILITY_MISSING:
        return None
    required = (error.details or {}).get("requiredCapabilities")
    data = {"requiredCapabilities": required if isinstance(required, dict) else {}}
    return WireRefusal(MISSING_REQUIRED_CLIENT_CAPABILITY, 400, error, data)


def invalid_params(message: str) -> WireRefusal:
    """-32602 (Invalid params), HTTP 400: a request whose params the revision's schema does
    not take (as bad `_meta` is answered)."""
    return _refusal(INVALID_PARAMS, 400, message)


def not_found(method: str) -> WireRefusal:
    return _refusal(METHOD_NOT_FOUND, 404, f"method {method[:64]!r} is not served here")


def missing_capability(extension: str) -> WireRefusal:
    """-32021: the method needs the client to declare `extension` in its capabilities."""
    return _refusal(
        MISSING_REQUIRED_CLIENT_CAPABILITY,
        400,
        f"this method belongs to the extension {extension!r}: declare it in _meta's"
        f" {META_CAPABILITIES!r} extensions",
        requiredCapabilities={"extensions": {extension: {}}},
    )


def consume_envelope(message: McpMessage) -> None:
    """Drop the revision's own keys (`io.modelcontextprotocol/...`) from the request's
    `_meta` once they are read: what the gateway relays to an MCP source (a read, a prompt, a
    completion, a call's `_meta`) goes to a server of the handshake era, which refuses a
    request carrying the 2026-07-28 envelope."""
    meta = message.params.get("_meta")
    if isinstance(meta, dict):
        for key in [k for k in meta if k.startswith(_ENVELOPE_PREFIX)]:
            del meta[key]
        if not meta:
            del message.params["_meta"]


def finish(method: str, result: dict[str, Any]) -> dict[str, Any]:
    """`result` as the revision answers it: `resultType`, the server's identity in `_meta`,
    and the caching hints on lists and reads."""
    done = dict(result)
    done["resultType"] = "complete"
    meta = done.get("_meta")
    done["_meta"] = {**(meta if isinstance(meta, dict) else {}), META_SERVER_INFO: SERVER_INFO}
    if method in CACHEABLE:
        done["ttlMs"] = CACHE_TTL_MS
        done["cacheScope"] = "private"  # per identity: never shared across tokens
    return done

"""`/mcp`: MCP's streamable HTTP transport, stateless, answering JSON or a call's event stream.

Every POST carries one JSON-RPC message and runs through the pipeline like an HTTP call:
`initialize`, `ping`, `tools/list` and the upstreams' resources and prompts (`catalog`) as
operations, `tools/call` as the tool call itself, so the same authentication, policy, rate
limits and audit apply; every message, a notification or a `ping` too, takes a token from
the caller's rate limit. GET opens the caller's server-to-client stream (`listen_stream`;
`initialize` answers an `Mcp-Session-Id` only as the transport's cue to open it: the gateway
keeps no session); DELETE, with no session to end, answers 405 as the transport allows. A
`tools/call` whose client accepts `text/event-stream` is answered by `CallStream`: an SSE
stream on the POST once the call sends an event the caller takes (progress, a log message at
or above the caller's `logging/setLevel`), plain JSON otherwise.

The transport's own checks come first: an `Origin` outside the gateway's Host allow-list is
refused 403 (a browser page on another site must not reach a local gateway), and an
`MCP-Protocol-Version` header naming a revision not served here 400 once the caller is known
(a missing header means 2025-03-26, as the transport says). `initialize` asking a revision
not served here is answered with the newest one served. A tool outside the scopes of a token
from the OAuth authorization server is 403 `insufficient_scope` (the client may step up);
for every other token it is a tool error (`isError`).

A POSTed JSON-RPC response is a client's answer to a request one of its calls' servers sent
it (`call_stream`, `client_requests`): it passes the pipeline as `mcp:response`, is refused
(400) unless its id was issued to the same identity, and is handed to the call waiting for it
on whichever replica runs it; accepted, it is answered 202.

A request on MCP 2026-07-28's stateless wire (its version in `params._meta`) is decided per
request and checked and answered by `stateless_era` (`server/discover` by `discover`); the
pipeline and everything above hold for it unchanged. On that wire a `tools/call` may be
answered with a task (`task_methods`: the call runs on in `gateway.mcp_tasks.TaskRunner`, and a
client that goes away does not cancel it), and `tasks/get`, `tasks/update` and
`tasks/cancel` are pipeline operations. The handshake era's revision 2025-11-25 gets the
same tasks in its own shape (`handshake_tasks`: `params.task`, `tasks/get`, `tasks/result`,
`tasks/cancel`). On the 2026-07-28 wire, server-to-client requests are the revision's multi
round-trip requests (`input_rounds`): a streamed `tools/call` whose client declared client
features (streamed or not) is answered `InputRequiredResult` when its server asks, and the
client's retry carrying `requestState` resumes that call, on any replica; a server's own
`InputRequiredResult` is relayed, and the retry is a new call carrying the answers to it. A
`resources/read` or `prompts/get` forwarded to an MCP source runs as a call does (a cancel
switch, `CallStream`, rounds), since its server may ask the client too; its relayed round
binds the URI, or the prompt's name and arguments.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse

from gateway.cancellation import CallCancel, cancel_when_client_goes
from gateway.config import app_settings
from gateway.gateway_error import GatewayError
from gateway.http.body import read_body, refuse_before_body
from gateway.http.gateway_parts import gateway_parts
from gateway.http.hot_routes import hot_route
from gateway.http.mcp import handshake_tasks, stateless_era, subscriptions_listen, task_methods
from gateway.http.mcp.call_stream import CallStream, LevelOf, accepts_stream, fixed_level
from gateway.http.mcp.cancel_notice import CANCELLED_METHOD, cancel_notice
from gateway.http.mcp.discover import discover
from gateway.http.mcp.listen_stream import (
    SESSION_HEADER,
    listen,
    new_session_id,
    session_capabilities,
)
from gateway.http.mcp.messages import (
    McpAnswer,
    McpMessage,
    is_tool_failure,
    parse_message,
    request_id_of,
    rpc_error,
    rpc_result,
    rpc_status,
    tool_failure,
    tool_result,
)
from gateway.http.mcp.subscriptions_listen import LISTEN_METHOD, admit, listen_response
from gateway.http.responses import challenge, method_not_allowed
from gateway.mcp_state import (
    ASKING_OPERATIONS,
    CAPABILITIES,
    SET_LEVEL_METHOD,
    STATE_FIELD,
    UPSTREAM_OPERATIONS,
    ClientRequests,
    InputRounds,
    RoundCall,
)
from gateway.mcp_tasks import new_task_id
from gateway.pipeline import Pipeline, RequestContext, allowed_specs
from protocol import (
    STATELESS_VERSION,
    ErrorCode,
    InitializeResult,
    InputRound,
    JsonRpcErrorResponse,
    JsonRpcRequest,
    JsonRpcResponse,
    SerfError,
    ToolSpec,
    client_capabilities,
)
from tools import ToolRegistry
from tools.calls import CallerClient

router = APIRouter(tags=["mcp"])

# Handshake-era revisions whose tools surface this endpoint serves unchanged.
SUPPORTED_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
NEWEST_VERSION = SUPPORTED_VERSIONS[-1]
VERSION_HEADER = "mcp-protocol-version"
RESPONSE_OPERATION = "mcp:response"
# The requests a server may answer in rounds (a 2026-07-28 client retries them with answers).
_ROUND_METHODS = ("tools/call", *ASKING_OPERATIONS)
_OPERATIONS = (
    "initialize",
    "ping",
    "tools/list",
    "tools/call",
    SET_LEVEL_METHOD,
    *UPSTREAM_OPERATIONS,
)


def _initialize(params: dict[str, Any]) -> dict[str, Any]:
    asked = params.get("protocolVersion")
    version = asked if asked in SUPPORTED_VERSIONS else NEWEST_VERSION
    capabilities = CAPABILITIES
    if version == handshake_tasks.HANDSHAKE_TASKS_VERSION:  # its tasks (handshake_tasks)
        capabilities = {**CAPABILITIES, "tasks": handshake_tasks.TASKS_CAPABILITY}
    result = InitializeResult(protocolVersion=version, capabilities=capabilities)
    return result.model_dump(by_alias=True)


def _listing(registry: ToolRegistry) -> Any:
    """`tools/list`: each tool as MCP describes one. A source's tool keeps its server's own
    title, output schema, annotations, icons and `_meta`; Conclave's own tools declare their
    output schema and the hints their `@tool` declaration implies."""

    def listed(spec: ToolSpec) -> dict[str, Any]:
        tool: dict[str, Any] = {"name": spec.name}
        if spec.title is not None:
            tool["title"] = spec.title
        tool["description"] = spec.description
        tool["inputSchema"] = spec.input_schema
        if spec.output_schema is not None:
            tool["outputSchema"] = spec.output_schema
        if spec.annotations is not None:
            tool["annotations"] = spec.annotations.as_mcp()
        if spec.icons is not None:
            tool["icons"] = spec.icons
        if spec.meta is not None:
            tool["_meta"] = spec.meta
        return tool

    async def listing(ctx: RequestContext) -> dict[str, Any]:
        tools = [listed(spec) for spec in allowed_specs(registry, ctx)]
        if ctx.headers.get(VERSION_HEADER) == handshake_tasks.HANDSHAKE_TASKS_VERSION:
            tools = [{**tool, **handshake_tasks.TASK_SUPPORT} for tool in tools]
        return {"tools": tools}

    return listing


def _operation(method: str) -> str:
    """What the audit and the metrics call a message: never the caller's own text, which
    could be any length (a method name is chosen by the caller)."""
    if method in _OPERATIONS:
        return f"mcp:{method}"
    return "mcp:notifications" if method.startswith("notifications/") else "mcp:(unknown method)"


def _version_refusal(request: Request) -> GatewayError | None:
    """INVALID_REQUEST when the `MCP-Protocol-Version` header names a revision not served."""
    asked = request.headers.get(VERSION_HEADER)
    if asked is None or asked in SUPPORTED_VERSIONS:
        return None
    return GatewayError.of(
        ErrorCode.INVALID_REQUEST,
        f"MCP-Protocol-Version {_shown(asked)!r} is not served here; send one of"
        f" {', '.join(SUPPORTED_VERSIONS)} (the one initialize answered)",
        param_hints={"MCP-Protocol-Version": f"one of {', '.join(SUPPORTED_VERSIONS)}"},
        details={"supported": list(SUPPORTED_VERSIONS)},
    )


def _origin_refused(request: Request) -> Response | None:
    """403 for a browser page from another origin (DNS rebinding), as the transport asks."""
    check = getattr(request.app, "host_check", None)
    origin = request.headers.get("origin")
    if check is None or check.allows_origin(origin):
        return None
    error = SerfError.of(
        ErrorCode.PERMISSION_DENIED,
        f"requests from Origin {_shown(origin or '')!r} are not answered here: add its host to"
        " CONCLAVE_ALLOWED_HOSTS if that page may use this gateway",
    )
    return JSONResponse(rpc_error(None, error), status_code=403)


def _shown(text: str, limit: int = 64) -> str:
    return text if len(text) <= limit else text[:limit] + "..."


def _context(request: Request, message: McpMessage, registry: ToolRegistry) -> RequestContext:
    method = message.method
    ctx = RequestContext("mcp", _operation(method), request.headers)
    if method == "tools/call":
        name = message.params.get("name")
        arguments = message.params.get("arguments") or {}
        if not isinstance(name, str) or not name or not isinstance(arguments, dict):
            ctx.input_error = GatewayError.of(
                ErrorCode.INVALID_REQUEST,
                "tools/call needs params.name (a string) and params.arguments (an object)",
            )
            return ctx
        meta = message.params.get("_meta")
        ctx.tool_name, ctx.arguments = name, arguments
        ctx.meta = meta if isinstance(meta, dict) else None
        ctx.operation = name
        ctx.cancel, ctx.request_id = CallCancel(), message.id  # see gateway.cancellation
    elif method == "tools/list":
        ctx.action = _listing(registry)
    elif method in UPSTREAM_OPERATIONS:
        ctx.action = gateway_parts(request.app).mcp_catalog.operation(method, message.params)
        if method in ASKING_OPERATIONS:  # its server may ask the client: run as a call is
            ctx.cancel, ctx.request_id = CallCancel(), message.id
    elif method == "initialize":
        params = message.params

        async def initialize(_: RequestContext) -> dict[str, Any]:
            return _initialize(params)

        ctx.action = initialize
    elif method == SET_LEVEL_METHOD:
        ctx.action = gateway_parts(request.app).log_levels.action(message.params)
    elif handshake_tasks.serves_task_method(request.headers.get(VERSION_HEADER), method):
        parts = gateway_parts(request.app)
        ctx.action = task_methods.task_action(
            method,
            message.params,
            parts.tasks,
            parts.inflight,
            parts.client_requests,
            handshake=True,
        )
        ctx.operation = f"mcp:{method}"
    elif method == CANCELLED_METHOD:
        ctx.action = cancel_notice(gateway_parts(request.app).inflight, message.params)
    elif method == "ping" or method.startswith("notifications/"):

        async def empty(_: RequestContext) -> dict[str, Any]:
            return {}

        ctx.action = empty
    else:
        ctx.input_error = GatewayError.of(
            ErrorCode.METHOD_NOT_FOUND,
            f"method {_shown(method)!r} is not served here;"
            f" this endpoint serves {', '.join(_OPERATIONS)}",
        )
    return ctx


def _stateless(
    request: Request, message: McpMessage, ctx: RequestContext, registry: ToolRegistry
) -> stateless_era.WireRefusal | None:
    """Turn `ctx` into the 2026-07-28 wire's: its checks, and `server/discover`."""
    refusal = stateless_era.check(request.headers, message, SUPPORTED_VERSIONS)
    if refusal is None and message.method == "server/discover":
        ctx.input_error = None
        ctx.action = discover(registry, (*SUPPORTED_VERSIONS, STATELESS_VERSION))
        ctx.operation = "mcp:server/discover"
    elif refusal is None and message.method in task_methods.TASK_METHODS:
        if not task_methods.declares_tasks(message.params):
            refusal = stateless_era.missing_capability(task_methods.TASKS_EXTENSION)
        else:
            parts = gateway_parts(request.app)
            ctx.input_error = None
            ctx.action = task_methods.task_action(
                message.method, message.params, parts.tasks, parts.inflight, parts.client_requests
            )
            ctx.operation = f"mcp:{message.method}"
    elif refusal is None and message.method == LISTEN_METHOD:
        if (problem := subscriptions_listen.filter_problem(message.params)) is not None:
            refusal = stateless_era.invalid_params(problem)
        ctx.input_error = None
        ctx.action = admit(gateway_parts(request.app).mcp_catalog, message.params)
        ctx.operation = subscriptions_listen.OPERATION
    elif refusal is None and _not_found(ctx.input_error):
        refusal = stateless_era.not_found(message.method)
    if refusal is not None:
        ctx.input_error = GatewayError(refusal.error)  # refused once the caller is known
    return refusal


def _not_found(error: BaseException | None) -> bool:
    return isinstance(error, GatewayError) and error.error.code is ErrorCode.METHOD_NOT_FOUND


@hot_route(
    router,
    "/mcp",
    "POST",
    body=JsonRpcRequest,
    answer=JsonRpcResponse,
    refusal=JsonRpcErrorResponse,
)
async def mcp_post(request: Request) -> Response:
    """`POST /mcp`: one JSON-RPC message in, its answer (or 202 for a notification) out."""
    if (refused := _origin_refused(request)) is not None:
        return refused
    pipeline: Pipeline = gateway_parts(request.app).pipeline
    registry: ToolRegistry = gateway_parts(request.app).registry
    rounds: InputRounds = gateway_parts(request.app).input_rounds
    body = b""
    message: McpMessage | None = None
    stateless, refusal, as_task = False, None, False
    level_of: LevelOf = gateway_parts(request.app).log_levels.level_of  # the identity's setLevel
    declared: dict[str, Any] = {}  # a 2026-07-28 client's features, from its _meta
    try:
        limit = app_settings(request.app).max_body_bytes
        await refuse_before_body(request, "mcp:*", limit)  # a refused caller's large body: unread
        body = await read_body(request, limit)
        parsed = parse_message(body)
        if isinstance(parsed, McpAnswer):
            return await _client_answer(request, pipeline, parsed)
        message = parsed
        ctx = _context(request, message, registry)
        if stateless := stateless_era.speaks_stateless(request.headers, message):
            declared = _declared(message)
            refusal = _stateless(request, message, ctx, registry)
            long_running_ms = app_settings(request.app).task_long_running_ms
            as_task = refusal is None and task_methods.runs_as_task(
                message, registry, long_running_ms
            )
            level_of = fixed_level(stateless_era.log_level(message))  # the request's own
            ctx.client = CallerClient(stateless_era.client_capabilities(message))
            stateless_era.consume_envelope(message)  # upstreams speak the handshake era
            if message.method in _ROUND_METHODS and STATE_FIELD in message.params:
                if not rounds.relays(message.params[STATE_FIELD]):  # a call still running
                    return await _resumed(request, pipeline, message, ctx)
                # A server's own round: the retry is a call of its own (input_rounds).
                retried = _round_call(message)
                ctx.on_admitted, as_task = rounds.admit_answer(message.params, retried), False
        else:  # revision 2025-11-25's tasks (handshake_tasks)
            version = request.headers.get(VERSION_HEADER)
            as_task = handshake_tasks.asks_for_task(version, message.method, message.params)
    except GatewayError as exc:
        ctx = RequestContext("mcp", "mcp:(unreadable)", request.headers, input_error=exc)
    finish = stateless_era.finish if stateless else _unchanged
    bad_version = None if stateless else _version_refusal(request)
    if bad_version is not None:
        ctx.input_error = bad_version  # refused by the scope stage, once the caller is known
    answer = partial(_answer, ctx, message, body, bad_version, refusal, finish, rounds)
    if as_task and message is not None and message.id is not None:
        # Answered once the call is admitted and its task recorded; it runs on (task_methods).
        parts, task_id = gateway_parts(request.app), new_task_id()
        if declared:  # its servers' requests wait in the task for tasks/update
            ctx.events = task_methods.asking_client(
                ctx, task_id, parts.tasks.store, parts.client_requests, declared
            )
        record = await parts.tasks.start(ctx, task_id)
        if record is None:  # refused before it ran: answered as any refusal
            return answer()
        if not stateless:
            return JSONResponse(rpc_result(message.id, handshake_tasks.created(record)))
        created = {**finish("tools/call", task_methods.created(record)), "resultType": "task"}
        return JSONResponse(rpc_result(message.id, created))
    if ctx.cancel is None:
        await pipeline.run(ctx)
        listening = message is not None and message.method == LISTEN_METHOD
        if stateless and listening and ctx.error is None:  # answered by its own stream
            parts = gateway_parts(request.app)
            subscriptions = parts.mcp_catalog.subscriptions
            principal = ctx.require_principal()
            assert message is not None
            return listen_response(
                parts.caller_streams, subscriptions, principal, message.id, ctx.result
            )
    elif message is not None and message.id is not None and accepts_stream(request):
        # Runs the call as it is sent, streaming its events if it has any (call_stream).
        parts = gateway_parts(request.app)
        # The client features its servers may ask it: from the handshake era's initialize,
        # or the 2026-07-28 request's own _meta (asked in rounds: input_rounds).
        if stateless:
            asked, in_rounds = declared, rounds if declared else None
        else:
            asked, in_rounds = session_capabilities(request.headers.get(SESSION_HEADER)), None
        requests = parts.client_requests
        return CallStream(pipeline, ctx, answer, level_of, requests, asked, in_rounds)
    elif message is not None and message.id is not None and stateless and declared:
        # A 2026-07-28 client that takes only JSON: its servers' requests asked in rounds all
        # the same, nothing streamed (call_stream, input_rounds).
        requests = gateway_parts(request.app).client_requests
        return CallStream(
            pipeline, ctx, answer, level_of, requests, declared, rounds, streams=False
        )
    else:  # a tool call: a client that closes its connection cancels it
        async with cancel_when_client_goes(request.scope, request.receive, ctx.cancel):
            await pipeline.run(ctx)
    return answer()


def _answer(
    ctx: RequestContext,
    message: McpMessage | None,
    body: bytes,
    bad_version: GatewayError | None,
    refusal: stateless_era.WireRefusal | None,
    finish: Callable[[str, dict[str, Any]], dict[str, Any]],
    rounds: InputRounds,
) -> Response:
    """The JSON-RPC answer of a message that has run through the pipeline (`finish` adds
    what the 2026-07-28 wire puts on a result; `refusal` is that wire's own 400 or 404; a
    server's own round is relayed to the client by `rounds`)."""
    request_id = message.id if message is not None else request_id_of(body)
    if ctx.error is not None:
        ours = refusal is not None and ctx.failed_stage == "scope"
        if refusal is not None and ours and ctx.error.message == refusal.error.message:
            return JSONResponse(refusal.body(request_id), status_code=refusal.http_status)
        if (needs := stateless_era.capability_refusal(ctx.error)) is not None:
            return JSONResponse(needs.body(request_id), status_code=needs.http_status)
        is_call = message is not None and message.method == "tools/call"
        if ctx.oauth and ctx.error.code in (ErrorCode.TOOL_NOT_ALLOWED, ErrorCode.AUTH_REVOKED):
            # An OAuth client can go back to its server: for a new token (401 invalid_token),
            # or for more scope (403 insufficient_scope, MCP authorization's step-up). Other
            # tokens see a tool error (isError).
            return JSONResponse(
                rpc_error(request_id, ctx.error),
                status_code=ctx.error.http_status,
                headers=challenge(ctx.error),
            )
        if is_call and request_id is not None and is_tool_failure(ctx.error, ctx.failed_stage):
            schema = ctx.tool is not None and ctx.tool.spec.output_schema is not None
            failure = tool_failure(ctx.error, ctx.usage, output_schema=schema)
            return JSONResponse(rpc_result(request_id, finish("tools/call", failure)))
        notification = message is not None and message.id is None
        status = rpc_status(ctx.error, notification=notification)
        if bad_version is not None and ctx.failed_stage == "scope":
            status = 400  # the transport's answer to a revision it does not speak
        return JSONResponse(
            rpc_error(request_id, ctx.error), status_code=status, headers=challenge(ctx.error)
        )
    if message is None or message.id is None:
        return Response(status_code=202)
    if isinstance(ctx.result, InputRound):  # a call's, a read's or a prompt's
        shell = finish(message.method, {})
        shell.pop("ttlMs", None)  # a round is no answer to cache
        shell.pop("cacheScope", None)
        asked = {**shell, **rounds.relayed(ctx, ctx.result, _round_call(message))}
        return JSONResponse(rpc_result(message.id, asked))
    if message.method == "tools/call":
        answer = tool_result(ctx.result, ctx.trace_id, ctx.usage)
        return JSONResponse(rpc_result(message.id, finish("tools/call", answer)))
    if message.method == "initialize":  # the transport's cue to open the GET stream
        headers = {SESSION_HEADER: new_session_id(message.params.get("capabilities"))}
        return JSONResponse(rpc_result(message.id, ctx.result), headers=headers)
    return JSONResponse(rpc_result(message.id, finish(message.method, ctx.result)))


async def _client_answer(request: Request, pipeline: Pipeline, answer: McpAnswer) -> Response:
    """A client's response: handed to the call waiting for it (202), once the pipeline
    admitted the caller and the id was issued to it."""
    requests: ClientRequests = gateway_parts(request.app).client_requests
    ctx = RequestContext("mcp", RESPONSE_OPERATION, request.headers)

    async def deliver(ctx: RequestContext) -> dict[str, Any]:
        principal = ctx.require_principal()
        if not requests.issued_to(principal, answer.id):
            raise GatewayError.of(
                ErrorCode.INVALID_REQUEST,
                f"no request with id {_shown(str(answer.id))!r} was sent to you: a response"
                " answers a request the gateway sent on one of your calls' streams",
            )
        await requests.answer(principal, str(answer.id), answer.response)
        return {}

    ctx.action = deliver
    await pipeline.run(ctx)
    if ctx.error is not None:
        return JSONResponse(
            rpc_error(None, ctx.error),
            status_code=rpc_status(ctx.error, notification=True),
            headers=challenge(ctx.error),
        )
    return Response(status_code=202)


def _declared(message: McpMessage) -> dict[str, Any]:
    """The client features a 2026-07-28 request's `_meta` declares (those MCP defines)."""
    return client_capabilities(stateless_era.client_capabilities(message))


async def _resumed(
    request: Request, pipeline: Pipeline, message: McpMessage, call: RequestContext
) -> Response:
    """A 2026-07-28 client's retry of a call (a read, a prompt) that asked it something
    (`input_rounds`)."""
    rounds: InputRounds = gateway_parts(request.app).input_rounds
    operation = _operation(message.method)
    ctx = RequestContext("mcp", operation, request.headers, input_error=call.input_error)
    ctx.request_id = message.id
    params = message.params

    async def resume(ctx: RequestContext) -> dict[str, Any]:
        return await rounds.resume(ctx, params)

    ctx.action = resume
    await pipeline.run(ctx)
    if ctx.error is not None:
        return JSONResponse(
            rpc_error(message.id, ctx.error),
            status_code=rpc_status(ctx.error),
            headers=challenge(ctx.error),
        )
    return JSONResponse(ctx.result["body"], status_code=ctx.result["status"])


def _round_call(message: McpMessage) -> RoundCall:
    """What a relayed round's retry must repeat: the tool and its arguments, the read's URI,
    the prompt's name and arguments."""
    params = message.params
    if message.method == "tools/call":
        arguments = params.get("arguments") or {}
        return str(params.get("name")), arguments if isinstance(arguments, dict) else {}
    if message.method == "resources/read":
        return message.method, {"uri": params.get("uri")}
    arguments = params.get("arguments") or {}
    return message.method, {"name": params.get("name"), "arguments": arguments}


def _unchanged(_: str, result: dict[str, Any]) -> dict[str, Any]:
    return result


async def mcp_get(request: Request) -> Response:
    """`GET /mcp`: the caller's server-to-client event stream (`listen_stream`)."""
    if (refused := _origin_refused(request)) is not None:
        return refused
    return await listen(request)


async def mcp_no_session(request: Request) -> Response:
    """`DELETE /mcp`: 405, the gateway keeps no session to end."""
    # The transport's answer (with a SERF body, as every refusal has).
    return method_not_allowed(request.method, "/mcp", "GET, POST")


router.add_route("/mcp", mcp_get, methods=["GET"])
router.add_route("/mcp", mcp_no_session, methods=["DELETE"])

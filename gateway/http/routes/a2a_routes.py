"""A2A agents served at `/a2a/{name}` (`gateway.a2a`): the card, JSON-RPC at the agent's path,
HTTP+JSON under `/rest`.

The card is public, as A2A discovery needs (it names the agent and what it does, and says to
bring a bearer token); every other request runs the six stages: authenticate, scope (the
deadline), authorize (the caller's `agent:<glob>` scopes name the agent), budget (the
identity's `a2a:<agent>` bucket; a SendMessage's share of the deadline), dispatch (a remote
agent's forwarded by `A2aForwarder`, a hosted agent's answered by `HostedA2a` from its tasks
in Redis) and account (audit, metrics, traces). A refusal is answered as the binding's A2A
error with the SERF envelope in its data; a body is read under `max_body_bytes`, as every
body is.
"""

from __future__ import annotations

import hashlib
import json
from email.utils import formatdate
from typing import Any

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse

from gateway.a2a import (
    CARD_TTL_S,
    HTTP_JSON,
    JSONRPC,
    A2aCall,
    A2aRequest,
    check_rpc_content_type,
    gateway_card,
    rest_error,
    rest_request,
    rpc_error,
    rpc_request,
)
from gateway.budgets import DelegatedCall
from gateway.cancellation import CallCancel, cancel_when_client_goes
from gateway.config import app_settings
from gateway.gateway_error import GatewayError
from gateway.http.body import read_body, refuse_before_body
from gateway.http.gateway_parts import gateway_parts
from gateway.http.responses import challenge
from gateway.pipeline import RequestContext
from protocol import A2A_METHODS, ErrorCode

router = APIRouter(prefix="/a2a", tags=["a2a"])
_CARD = "/.well-known/agent-card.json"
_HANDS_WORK = frozenset({"SendMessage", "SendStreamingMessage"})


@router.get("/{name}" + _CARD)
async def agent_card(name: str, request: Request) -> Response:
    """The agent's card, its interfaces the gateway's (no token needed: A2A discovery)."""
    parts = gateway_parts(request.app)
    agent = parts.a2a_agents.get(name)
    hosted = parts.hosted_agents.get(name)
    origin = f"{request.url.scheme}://{request.url.netloc}"
    try:
        if hosted is not None:
            served, read_at = hosted.card(origin), hosted.card_read_at
        elif agent is not None:
            served = gateway_card(await agent.card(), origin, name)
            read_at = agent.card_read_at
        else:
            raise GatewayError.of(ErrorCode.NOT_FOUND, f"no A2A agent {name!r} is served here")
    except GatewayError as exc:
        status, body = rest_error(exc.error)
        return JSONResponse(body, status)
    if parts.card_signer is not None:
        served = parts.card_signer.signed(served)
    card = json.dumps(served, separators=(",", ":")).encode()
    etag = f'"{hashlib.blake2b(card, digest_size=12).hexdigest()}"'
    if request.headers.get("if-none-match") == etag:
        return Response(status_code=304, headers={"ETag": etag})
    headers = {
        "Cache-Control": f"public, max-age={int(CARD_TTL_S)}",
        "ETag": etag,
        "Last-Modified": formatdate(read_at, usegmt=True),
    }
    return Response(card, media_type="application/json", headers=headers)


@router.post("/{name}")
@router.post("/{name}/", include_in_schema=False)  # a client joining paths adds the slash
async def a2a_jsonrpc(name: str, request: Request) -> Response:
    """One JSON-RPC request to the agent."""
    request_id: Any = None
    a2a: A2aRequest | None = None
    body = b""
    input_error: GatewayError | None = None
    try:
        check_rpc_content_type(request.headers.get("content-type"))
        body = await _body(request, name)
        document = json.loads(body)
        if not isinstance(document, dict):
            raise _invalid("a JSON-RPC request is an object")
        request_id = document.get("id")
        method = document.get("method")
        if document.get("jsonrpc") != "2.0" or not isinstance(method, str):
            raise _invalid('a JSON-RPC 2.0 request has "jsonrpc": "2.0" and a method')
        if method not in A2A_METHODS:
            raise GatewayError.of(
                ErrorCode.METHOD_NOT_FOUND,
                f"{method[:64]!r} is not an A2A 1.0 method; these are: {', '.join(A2A_METHODS)}",
            )
        a2a = rpc_request(method, document.get("params"))
    except GatewayError as exc:
        input_error = exc
    except ValueError:
        input_error = GatewayError.of(ErrorCode.PARSE_ERROR, "the body is not JSON")
    ctx = await _run(request, name, a2a, "POST", "", body, input_error, request_id)
    if ctx.error is not None:
        status, answer = rpc_error(request_id, ctx.error)
        return JSONResponse(answer, status, headers=challenge(ctx.error))
    response: Response = ctx.result
    return response


@router.get("/{name}/rest/{path:path}")
async def a2a_rest_get(name: str, path: str, request: Request) -> Response:
    """An HTTP+JSON GET to the agent (GetTask, ListTasks, SubscribeToTask, push configs,
    the extended card)."""
    return await _rest(name, path, request)


@router.post("/{name}/rest/{path:path}")
async def a2a_rest_post(name: str, path: str, request: Request) -> Response:
    """An HTTP+JSON POST to the agent (SendMessage, SendStreamingMessage, CancelTask,
    a push config)."""
    return await _rest(name, path, request)


@router.delete("/{name}/rest/{path:path}")
async def a2a_rest_delete(name: str, path: str, request: Request) -> Response:
    """An HTTP+JSON DELETE to the agent (a push config)."""
    return await _rest(name, path, request)


async def _rest(name: str, path: str, request: Request) -> Response:
    body = b""
    a2a: A2aRequest | None = None
    input_error: GatewayError | None = None
    try:
        if request.method != "GET":
            body = await _body(request, name)
        document = json.loads(body) if body.strip() else None
        a2a = rest_request(request.method, "/" + path, document)
        if a2a is None:
            raise GatewayError.of(
                ErrorCode.NOT_FOUND,
                f"{request.method} /{path[:64]} is not an A2A 1.0 HTTP+JSON route",
            )
    except GatewayError as exc:
        input_error = exc
    except ValueError:
        input_error = GatewayError.of(ErrorCode.PARSE_ERROR, "the body is not JSON")
    ctx = await _run(request, name, a2a, request.method, "/" + path, body, input_error)
    if ctx.error is not None:
        status, answer = rest_error(ctx.error)
        return JSONResponse(answer, status, headers=challenge(ctx.error))
    response: Response = ctx.result
    return response


async def _run(
    request: Request,
    name: str,
    a2a: A2aRequest | None,
    verb: str,
    path: str,
    body: bytes,
    input_error: GatewayError | None,
    request_id: Any = None,
) -> RequestContext:
    parts = gateway_parts(request.app)
    agent = parts.a2a_agents.get(name)
    hosted = parts.hosted_agents.get(name)

    async def forward(ctx: RequestContext) -> Response:
        assert a2a is not None  # the parse passed
        if hosted is not None:
            binding = JSONRPC if verb == "POST" and path == "" else HTTP_JSON
            query = request.url.query
            return await parts.hosted.serve(ctx, hosted, a2a, binding, body, query, request_id)
        assert agent is not None  # authorize passed
        call = A2aCall(agent, a2a, verb, path, request.url.query, body)
        return await parts.a2a.forward(ctx, call)

    served = hosted.config if hosted is not None else agent.config if agent is not None else None
    delegated = None  # a request handing the agent work is weighed by ATBA as a call
    if served is not None and a2a is not None and a2a.method in _HANDS_WORK:
        delegated = DelegatedCall(f"a2a:{name}", int(served.timeout_s * 1000))
    ctx = RequestContext(
        "a2a",
        f"a2a:{a2a.method}" if a2a is not None else "a2a:(unreadable)",
        request.headers,
        a2a_agent=name,
        delegated=delegated,
        action=forward,
        input_error=input_error,
        cancel=CallCancel() if input_error is None else None,
    )
    if ctx.cancel is None:
        await parts.pipeline.run(ctx)
    else:  # a caller that closes its connection cancels the request to the agent
        async with cancel_when_client_goes(request.scope, request.receive, ctx.cancel):
            await parts.pipeline.run(ctx)
    return ctx


async def _body(request: Request, name: str) -> bytes:
    """The body under `max_body_bytes`; a caller the headers already refuse is refused
    before a large body of its is read."""
    limit = app_settings(request.app).max_body_bytes
    await refuse_before_body(request, f"a2a:{name}", limit)
    return await read_body(request, limit)


def _invalid(message: str) -> GatewayError:
    return GatewayError.of(ErrorCode.INVALID_REQUEST, message)

"""The tools API: what the caller may call, and calling one. Both run the whole pipeline."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request, Response

from gateway.cancellation import CallCancel, cancel_when_client_goes
from gateway.config import app_settings
from gateway.http.body import read_body, refuse_before_body
from gateway.http.gateway_parts import gateway_parts
from gateway.http.hot_routes import hot_route
from gateway.http.responses import refusal
from gateway.identity import shows_traceback
from gateway.pipeline import Pipeline, RequestContext, allowed_specs
from protocol import DEBUG_HEADER, ToolCallRequest, ToolCallResult, ToolSpec
from tools import ToolRegistry, ToolResult

router = APIRouter(prefix="/v1/tools", tags=["tools"])


@router.get("", response_model=list[ToolSpec])
async def list_tools(request: Request) -> Any:
    registry: ToolRegistry = gateway_parts(request.app).registry

    async def listing(ctx: RequestContext) -> list[ToolSpec]:
        return allowed_specs(registry, ctx)

    ctx = RequestContext("http", "tools:list", request.headers, action=listing)
    await _pipeline(request).run(ctx)
    if ctx.error is not None:
        return refusal(ctx.error)
    return ctx.result


@hot_route(router, "/v1/tools/{name}/call", "POST", body=ToolCallRequest, answer=ToolCallResult)
async def call_tool(request: Request) -> Response:
    """`POST /v1/tools/{name}/call`: ToolCallRequest in, ToolCallResult or a SERF envelope out."""
    name: str = request.path_params["name"]
    ctx = RequestContext("http", name, request.headers, tool_name=name)
    # Only a caller that asked for tracebacks is checked for the admin key.
    ctx.show_traceback = DEBUG_HEADER in request.headers and shows_traceback(
        request.headers, app_settings(request.app)
    )
    try:
        limit = app_settings(request.app).max_body_bytes
        await refuse_before_body(request, name, limit)
        body = await read_body(request, limit)
        call = ToolCallRequest.model_validate_json(body or b"{}")
    except Exception as exc:  # refused by the scope stage, once we know who sent it
        ctx.input_error = exc
    else:
        ctx.arguments, ctx.limits, ctx.budget = call.arguments, call.limits, call.budget
        ctx.cancel = CallCancel()
    if ctx.cancel is None:
        await _pipeline(request).run(ctx)
    else:  # a client that closes its connection cancels the call
        async with cancel_when_client_goes(request.scope, request.receive, ctx.cancel):
            await _pipeline(request).run(ctx)
    if ctx.error is not None:
        return refusal(ctx.error)
    assert ctx.usage is not None
    output: ToolResult = ctx.result
    result = ToolCallResult(
        tool=name,
        result=output.value,
        content=output.content,
        structured_content=output.structured,
        usage=ctx.usage,
        budget=ctx.grant,
        trace_id=ctx.trace_id,
    )
    return Response(result.model_dump_json(by_alias=True), media_type="application/json")


def _pipeline(request: Request) -> Pipeline:
    pipeline: Pipeline = gateway_parts(request.app).pipeline
    return pipeline

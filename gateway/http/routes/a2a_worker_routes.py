"""The workers of hosted A2A agents, `/v1/a2a/{name}/work/...` (`gateway.a2a.hosted_work`):
`POST .../work/next` claims the next task (a long poll of up to `wait_s`, at most 20 s; 204
when none came), with a task token: the agent's identity bound to the task's delegation chain
(`hosted_work.task_token_ttl_s` says how long it lives); `POST .../work/{task_id}` writes the
worker's update under its lease's token.

Both run the pipeline (authenticate, scope, authorize, budget, the operation as dispatch's
action, account), as the agent's own identity: a worker holds the token of the agent it
serves, and any other identity is refused AGENT_NOT_ALLOWED. A worker that goes away mid-poll
cancels its poll, so no task is claimed for it after it left.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from fastapi import APIRouter, Query, Request, Response
from pydantic import BaseModel, ConfigDict, ValidationError

from gateway.a2a import HostedAgent, check_worker, next_work, task_token_ttl_s
from gateway.cancellation import CallCancel, cancel_when_client_goes
from gateway.config import app_settings
from gateway.gateway_error import GatewayError
from gateway.http.body import read_body
from gateway.http.gateway_parts import gateway_parts
from gateway.http.responses import refusal
from gateway.identity import issue_token
from gateway.pipeline import RequestContext
from protocol import A2aWorkUpdate, Principal

router = APIRouter(prefix="/v1/a2a", tags=["a2a"])


class _NoFields(BaseModel):
    model_config = ConfigDict(extra="forbid")


Work = Callable[[HostedAgent, Principal], Awaitable[Response]]


@router.post("/{name}/work/next")
async def claim_work(
    name: str, request: Request, wait_s: float = Query(default=20.0, ge=0, le=20)
) -> Response:
    """The next task of hosted agent `name`, leased to the caller (204: none came). It takes
    no body but an empty object: any other is refused as every route refuses a wrong one."""
    try:
        raw = await read_body(request, app_settings(request.app).max_body_bytes)
        _NoFields.model_validate_json(raw if raw.strip() else b"{}")
    except (GatewayError, ValidationError) as exc:
        return await _through_pipeline(request, name, "a2a-work:next", None, exc)

    async def claim(agent: HostedAgent, principal: Principal) -> Response:
        tasks = gateway_parts(request.app).hosted.tasks
        item = await next_work(tasks, agent, wait_s)
        if item is None:
            return Response(status_code=204)
        settings = app_settings(request.app)
        ttl_s = task_token_ttl_s(agent, item, principal, settings.token_ttl_max_s)
        task_token = issue_token(
            settings,
            tenant=principal.tenant,
            agent=principal.agent,
            scopes=principal.scopes,
            obo=principal.obo,
            ttl_s=ttl_s,
            generation=principal.generation,
            chain=item.caller.chain,
        )
        item = item.model_copy(update={"task_token": task_token})
        return Response(item.model_dump_json(), media_type="application/json")

    return await _through_pipeline(request, name, "a2a-work:next", claim)


@router.post("/{name}/work/{task_id}")
async def update_work(name: str, task_id: str, request: Request) -> Response:
    """The worker's update to its task: its state, message and artifact, under its token."""
    try:
        raw = await read_body(request, app_settings(request.app).max_body_bytes)
        update = A2aWorkUpdate.model_validate_json(raw)
    except (GatewayError, ValidationError) as exc:
        return await _through_pipeline(request, name, "a2a-work:update", None, exc)

    async def write(agent: HostedAgent, principal: Principal) -> Response:
        ack = await gateway_parts(request.app).hosted.update(agent, task_id, update)
        return Response(ack.model_dump_json(), media_type="application/json")

    return await _through_pipeline(request, name, "a2a-work:update", write)


async def _through_pipeline(
    request: Request,
    name: str,
    operation: str,
    work: Work | None,
    input_error: BaseException | None = None,
) -> Response:
    parts = gateway_parts(request.app)

    async def perform(ctx: RequestContext) -> Response:
        assert work is not None  # the body parsed
        principal = ctx.require_principal()
        return await work(check_worker(parts.hosted_agents.get(name), name, principal), principal)

    ctx = RequestContext(
        "http",
        operation,
        request.headers,
        action=perform,
        input_error=input_error,
        cancel=CallCancel() if input_error is None else None,
    )
    if ctx.cancel is None:
        await parts.pipeline.run(ctx)
    else:
        async with cancel_when_client_goes(request.scope, request.receive, ctx.cancel):
            await parts.pipeline.run(ctx)
    if ctx.error is not None:
        return refusal(ctx.error)
    response: Response = ctx.result
    return response

"""`GET /v1/quotas` (agents): the quotas the caller's calls count against (conclave.toml's
`[[quota]]`), each limit's use in its current window, what remains and when it resets
(docs/governance.md). It runs the pipeline (authenticated, audited); a quota per tool is
shown for each tool the caller may call."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response

from gateway.http.gateway_parts import gateway_parts
from gateway.http.responses import refusal
from gateway.pipeline import RequestContext

router = APIRouter(prefix="/v1/quotas", tags=["quotas"])


@router.get("")
async def read_quotas(request: Request) -> Response:
    """The caller's quotas: each limit's use, what remains, when its window ends."""
    parts = gateway_parts(request.app)

    async def uses(ctx: RequestContext) -> Response:
        principal = ctx.require_principal()
        tools = [t.name for t in parts.registry if t.callable_by(principal)]
        found = await parts.quotas.uses(principal, tools)
        return Response(
            '{"quotas":[' + ",".join(u.model_dump_json() for u in found) + "]}",
            media_type="application/json",
        )

    ctx = RequestContext("http", "quotas:read", request.headers, action=uses)
    await parts.pipeline.run(ctx)
    if ctx.error is not None:
        return refusal(ctx.error)
    response: Response = ctx.result
    return response

"""`/v1/approvals` (approvers): the calls held for approval, and an approver's decision.

An approver is an identity whose token holds `approve:<tool glob>` (an agent registered with
`approves`); it sees and decides its own tenant's held calls of the tools its globs cover.
`GET /v1/approvals` lists the pending ones, oldest first; `GET /v1/approvals/{id}` shows one,
pending or settled (who asked, the exact arguments, the policy and its reason, who decided,
when, the note); `POST /v1/approvals/{id}/approve` and `.../deny` (body `{"note": ...}`,
optional) decide it once, releasing the held call on whichever replica holds it.

Every route runs the pipeline (authenticate, scope, authorize, budget: a revoked token is
refused; the decision as dispatch's action; account: the audit). Refusals: an approval of
another tenant, or of a tool the approver's globs do not cover, 404 `NOT_FOUND`; the caller's
own call, or one made on its behalf (its user, an agent on its delegation chain), 403
`PERMISSION_DENIED`; decided before, 400 `INVALID_REQUEST`; expired, 410 `APPROVAL_EXPIRED`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Annotated

from fastapi import APIRouter, Path, Request, Response
from pydantic import ValidationError

from gateway.approvals import ApprovalBook, Decision
from gateway.config import app_settings
from gateway.gateway_error import GatewayError
from gateway.http.body import read_body
from gateway.http.gateway_parts import gateway_parts
from gateway.http.responses import refusal
from gateway.pipeline import RequestContext
from protocol import APPROVAL_ID_PATTERN, ApprovalNote, ApprovalRecord, Principal

router = APIRouter(prefix="/v1/approvals", tags=["approvals"])
ApprovalId = Annotated[str, Path(pattern=APPROVAL_ID_PATTERN)]
Operation = Callable[[ApprovalBook, Principal], Awaitable[Response]]


def _json(text: str) -> Response:
    return Response(text, media_type="application/json")


def _record(record: ApprovalRecord) -> Response:
    return _json(record.model_dump_json())


@router.get("")
async def list_approvals(request: Request) -> Response:
    """The pending calls of the caller's tenant it may decide, oldest first."""

    async def pending(book: ApprovalBook, approver: Principal) -> Response:
        records = await book.pending(approver)
        return _json('{"approvals":[' + ",".join(r.model_dump_json() for r in records) + "]}")

    return await _through_pipeline(request, "approvals:list", pending)


@router.get("/{approval_id}")
async def show_approval(approval_id: ApprovalId, request: Request) -> Response:
    """One approval, pending or settled."""

    async def show(book: ApprovalBook, approver: Principal) -> Response:
        return _record(await book.show(approver, approval_id))

    return await _through_pipeline(request, "approvals:show", show)


@router.post("/{approval_id}/approve")
async def approve(approval_id: ApprovalId, request: Request) -> Response:
    """Approve the held call: it runs with exactly the arguments shown."""
    return await _decide(request, approval_id, "approved")


@router.post("/{approval_id}/deny")
async def deny(approval_id: ApprovalId, request: Request) -> Response:
    """Deny the held call: its caller gets APPROVAL_DENIED with the note."""
    return await _decide(request, approval_id, "denied")


async def _decide(request: Request, approval_id: str, decision: Decision) -> Response:
    operation = f"approvals:{'approve' if decision == 'approved' else 'deny'}"
    try:
        raw = await read_body(request, app_settings(request.app).max_body_bytes)
        body = ApprovalNote.model_validate_json(raw if raw.strip() else b"{}")
    except (GatewayError, ValidationError) as exc:
        return await _through_pipeline(request, operation, None, exc)

    async def decide(book: ApprovalBook, approver: Principal) -> Response:
        return _record(await book.decide(approver, approval_id, decision, body.note))

    return await _through_pipeline(request, operation, decide)


async def _through_pipeline(
    request: Request,
    operation: str,
    work: Operation | None,
    input_error: BaseException | None = None,
) -> Response:
    parts = gateway_parts(request.app)

    async def perform(ctx: RequestContext) -> Response:
        assert work is not None  # the body parsed
        return await work(parts.approvals, ctx.require_principal())

    ctx = RequestContext(
        "http", operation, request.headers, action=perform, input_error=input_error
    )
    await parts.pipeline.run(ctx)
    if ctx.error is not None:
        return refusal(ctx.error)
    response: Response = ctx.result
    return response

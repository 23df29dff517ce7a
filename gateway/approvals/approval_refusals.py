"""Every refusal of the approvals, built in one place: a held call's (denied, expired), an
approver's (no such approval, not theirs to decide, already decided), a tenant's (too many
calls waiting)."""

from __future__ import annotations

from gateway.gateway_error import GatewayError
from protocol import ApprovalRecord, ErrorCode


def approval_denied(record: ApprovalRecord) -> GatewayError:
    note = f": {record.note}" if record.note else ""
    return GatewayError.of(
        ErrorCode.APPROVAL_DENIED,
        f"{record.decided_by} denied this call of {record.tool!r} (held by policy"
        f" {record.policy!r}){note}. Do not retry it as it is: change the plan",
        details=_details(record),
    )


def approval_expired(record: ApprovalRecord) -> GatewayError:
    why = (
        "its deadline passed"
        if record.deadline_ms is not None and record.expires_at_ms >= record.deadline_ms
        else "the policy's approval time ran out"
    )
    return GatewayError.of(
        ErrorCode.APPROVAL_EXPIRED,
        f"nobody approved this call of {record.tool!r} (held by policy {record.policy!r})"
        f" before {why}: call again with a later deadline (X-Conclave-Deadline) once an"
        " approver is at hand; the call again is a new approval",
        details=_details(record),
    )


def approval_not_found(approval_id: str) -> GatewayError:
    return GatewayError.of(
        ErrorCode.NOT_FOUND,
        f"no approval {approval_id!r} in your tenant (never asked, or no longer kept):"
        " GET /v1/approvals lists the pending ones",
    )


def may_not_decide(record: ApprovalRecord, why: str) -> GatewayError:
    return GatewayError.of(
        ErrorCode.PERMISSION_DENIED,
        f"you may not decide approval {record.id} of {record.tool!r}: {why}",
        details={"approval": record.id},
    )


def settled_before(record: ApprovalRecord) -> GatewayError:
    by = f" by {record.decided_by}" if record.decided_by else ""
    return GatewayError.of(
        ErrorCode.INVALID_REQUEST,
        f"approval {record.id} is {record.status}{by} already: a decision is made once",
        details=_details(record),
    )


def too_many_waiting(tenant: str, most: int) -> GatewayError:
    return GatewayError.of(
        ErrorCode.RATE_LIMITED,
        f"tenant {tenant} has {most} calls waiting for approval, the most it may: retry once"
        " approvers have decided some",
        details={"limited_by": "approvals_pending", "most_pending": most},
    )


def _details(record: ApprovalRecord) -> dict[str, object]:
    return {
        "approval": record.id,
        "policy": record.policy,
        "status": record.status,
        "decided_by": record.decided_by,
        "note": record.note,
    }

"""Approvals on the wire: a call an `approve` policy rule holds until a person decides
(docs/governance.md), as `GET /v1/approvals` shows it, and an approver's decision.

A held call is bound to its caller (tenant, agent, on-behalf-of user, delegation chain), the
tool, the digest of its canonical arguments and its deadline; only those arguments run once
it is approved. Approvers are identities whose token holds `approve:<tool glob>` (an agent
registered with `approves`), within their own tenant; nobody approves a call of their own or
one made on their behalf.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

APPROVAL_ID_PATTERN = r"^ap_[0-9a-f]{32}$"

# pending: waiting on a person; approved / denied: decided (approved: its call was released);
# expired: its deadline or the rule's approval TTL passed first; withdrawn: its caller left.
ApprovalStatus = Literal["pending", "approved", "denied", "expired", "withdrawn"]


class ApprovalRecord(BaseModel):
    """One held call and what became of it: who asked, what, why, who decided, when."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(pattern=APPROVAL_ID_PATTERN)
    tenant: str
    agent: str  # who asked: the caller
    obo: str | None = None  # the user it called on behalf of
    chain: tuple[str, ...] = ()  # whom the caller acts for on its delegation chain: tenant/agent
    tool: str
    arguments: dict[str, Any]  # exactly what runs once approved
    digest: str  # sha256 of the arguments' canonical JSON
    policy: str  # the rule that asked for approval
    reason: str = ""
    trace_id: str = ""
    asked_at_ms: int
    deadline_ms: int | None = None  # the caller's deadline, when it had one
    expires_at_ms: int  # the deadline or the rule's approval TTL, whichever comes first
    status: ApprovalStatus = "pending"
    decided_by: str = ""  # "tenant/agent" of the approver (with its user: "... (obo)")
    decided_at_ms: int | None = None
    note: str = ""


class ApprovalNote(BaseModel):
    """Body of `POST /v1/approvals/{id}/approve` and `.../deny`."""

    model_config = ConfigDict(extra="forbid")

    note: str = Field(default="", max_length=1024)

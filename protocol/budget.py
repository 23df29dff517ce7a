"""Time budgets on the wire: the run's deadline, the planned chain, and what was granted."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

DEADLINE_HEADER = "X-Conclave-Deadline"
PLAN_HEADER = "X-Conclave-Plan"
RESERVE_HEADER = "X-Conclave-Reserve"
SESSION_HEADER = "X-Conclave-Session"


class Budget(BaseModel):
    """What a caller says about time: an absolute deadline and the calls still to come."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    deadline_ms: int | None = Field(default=None, gt=0, description="unix ms")
    plan: tuple[str, ...] = Field(default=(), description="upcoming tool names, this call first")
    reserve_ms: int = Field(default=0, ge=0, description="time kept back for model turns")


class BudgetGrant(BaseModel):
    """What the gateway granted one call, returned with every result."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    granted_ms: int = Field(ge=0)
    remaining_ms: int | None = Field(default=None, description="deadline minus now, after the call")

"""Time budgets on the wire: the run's deadline, the planned chain, and what was granted."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

DEADLINE_HEADER = "X-Conclave-Deadline"
PLAN_HEADER = "X-Conclave-Plan"
RESERVE_HEADER = "X-Conclave-Reserve"
SESSION_HEADER = "X-Conclave-Session"
# "off": never hedge this call (the gateway may otherwise start a second attempt of an
# idempotent tool's call that runs long; docs/concepts.md, "ATBA").
HEDGE_HEADER = "X-Conclave-Hedge"


class Budget(BaseModel):
    """What a caller says about time: an absolute deadline and the calls still to come."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    deadline_ms: int | None = Field(default=None, gt=0, description="unix ms")
    plan: tuple[str, ...] = Field(default=(), description="upcoming tool names, this call first")
    reserve_ms: int = Field(default=0, ge=0, description="time kept back for model turns")
    hedge: bool = Field(
        default=True, description="false: never start a second attempt of this call"
    )


class BudgetGrant(BaseModel):
    """What the gateway granted one call, returned with every result."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    granted_ms: int = Field(ge=0)
    remaining_ms: int | None = Field(default=None, description="deadline minus now, after the call")
    hedged: bool = Field(
        default=False, description="a second attempt ran beside the first (an idempotent tool)"
    )
    hedge_won: bool = Field(default=False, description="the answer came from the second attempt")


class ToolLatency(BaseModel):
    """`GET /v1/tools/{name}/latency`: what the gateway's window says about a tool's duration."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    tool: str
    p50_ms: float
    p95_ms: float
    samples: int = Field(ge=0)
    censored: int = Field(ge=0, description="samples of calls killed at their limit")
    source: Literal["observed", "declared"] = Field(
        description="declared: too few samples yet, the tool's declared timeout stands in"
    )
    window_s: float
    breaker: Literal["closed", "open", "half_open"] = "closed"

"""Time budgets (ATBA): per-tool latency windows, the allocation, and circuit breakers."""

from gateway.budgets.allocation import Allocation, allocate_budget, best_attempt, planned_chain
from gateway.budgets.allocator import AtbaAllocator
from gateway.budgets.breaker import BreakerState, CircuitBreaker, counts_against_tool
from gateway.budgets.compose import TimeBudgets, build_time_budgets
from gateway.budgets.guard import GuardedExecutor, refine_tool_error
from gateway.budgets.latency import (
    LatencyEstimate,
    LatencySample,
    LatencyWindow,
    censored_quantile,
    finish_curve,
)
from gateway.budgets.outcome import OutcomeRecorder

__all__ = [
    "Allocation",
    "AtbaAllocator",
    "BreakerState",
    "CircuitBreaker",
    "GuardedExecutor",
    "LatencyEstimate",
    "LatencySample",
    "LatencyWindow",
    "OutcomeRecorder",
    "TimeBudgets",
    "allocate_budget",
    "best_attempt",
    "build_time_budgets",
    "censored_quantile",
    "counts_against_tool",
    "finish_curve",
    "planned_chain",
    "refine_tool_error",
]

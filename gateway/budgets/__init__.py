"""Time budgets (ATBA): per-tool latency windows, the allocation, and circuit breakers."""

from gateway.budgets.allocation import Allocation, allocate_budget, planned_chain
from gateway.budgets.breaker import BreakerState, CircuitBreaker, counts_against_tool
from gateway.budgets.latency import (
    LatencyEstimate,
    LatencySample,
    LatencyWindow,
    censored_quantile,
)

__all__ = [
    "Allocation",
    "BreakerState",
    "CircuitBreaker",
    "LatencyEstimate",
    "LatencySample",
    "LatencyWindow",
    "allocate_budget",
    "censored_quantile",
    "counts_against_tool",
    "planned_chain",
]

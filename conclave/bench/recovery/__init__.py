"""`conclave bench budgets` and `conclave bench errors`: recovering under deadlines and
failures, on one gateway with the fault tools."""

from conclave.bench.recovery.budgets_suite import (
    DEADLINES_MS,
    DEFAULT_TIMEOUT_MS,
    HEDGE_SHARE,
    HEDGED,
    POLICIES,
    WORKERS,
    WORKLOADS,
    Chain,
    make_chains,
    on_workload,
)

__all__ = [
    "DEADLINES_MS",
    "DEFAULT_TIMEOUT_MS",
    "HEDGED",
    "HEDGE_SHARE",
    "POLICIES",
    "WORKERS",
    "WORKLOADS",
    "Chain",
    "make_chains",
    "on_workload",
]

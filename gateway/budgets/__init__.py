"""Budgets: admission (revocation + rate limit), time (ATBA) and circuit breakers, in Redis.

Each idea has its module: `admission` (one script per request), `latency_window` (p50/p95 per
tenant and tool, Kaplan-Meier over censored samples), `grant_rule` (the pure ATBA rule),
`estimate_cache` (the estimates a process holds, made again only when their window moved),
`time_ask` (what a caller asks of a request's time: deadline, plan, reserve, read once by the
scope stage; a delegation to an A2A agent as a call), `allocator` (the budget stage's seam
over the rule), `breaker` (per tenant and tool), `outcome` (what the account stage records of
each finished call: its sample, its kill's lateness, the breaker's evidence and the caller's
hedge share, one round trip); hedging an idempotent tool's call has `hedge_rule` (ATBA's
wait-or-hedge choice), `hedge_budget` (each identity's share of hedges, in Redis) and
`hedge_race` (the two attempts, first answer wins). Their Lua lives in `lua/`, one file a
script.
"""

from gateway.budgets.admission import (
    Admission,
    AdmissionDecision,
    CallReads,
    InFlight,
    RateLimit,
    in_flight_key,
)
from gateway.budgets.allocator import AtbaAllocator, TimeGrant
from gateway.budgets.breaker import BreakerState, CircuitBreaker, breaker_key, counts_against_tool
from gateway.budgets.call_plan import HEDGE_WORTH, HOPELESS, CallPlan, plan_call
from gateway.budgets.estimate_cache import EstimateCache
from gateway.budgets.grant_rule import Allocation, allocate_budget, best_attempt, planned_chain
from gateway.budgets.hedge_budget import DEFAULT_CAP as DEFAULT_HEDGE_CAP
from gateway.budgets.hedge_budget import HedgeBudget, hedge_key
from gateway.budgets.hedge_race import HedgeRace, HedgeReport
from gateway.budgets.hedge_rule import HedgePlan, plan_fixed_hedge, plan_hedge
from gateway.budgets.latency_window import (
    KILL_OVERSHOOT,
    LatencyEstimate,
    LatencySample,
    LatencyWindow,
    WindowRead,
    censored_quantile,
    finish_curve,
    kill_overshoot_of,
    version_key,
    window_key,
)
from gateway.budgets.outcome import CallFeedback, OutcomeRecorder
from gateway.budgets.time_ask import (
    DelegatedCall,
    PlanBounds,
    TimeAsk,
    TimedCall,
    read_time_ask,
)

__all__ = [
    "DEFAULT_HEDGE_CAP",
    "HEDGE_WORTH",
    "HOPELESS",
    "KILL_OVERSHOOT",
    "Admission",
    "AdmissionDecision",
    "Allocation",
    "AtbaAllocator",
    "BreakerState",
    "CallFeedback",
    "CallPlan",
    "CallReads",
    "CircuitBreaker",
    "DelegatedCall",
    "EstimateCache",
    "HedgeBudget",
    "HedgePlan",
    "HedgeRace",
    "HedgeReport",
    "InFlight",
    "LatencyEstimate",
    "LatencySample",
    "LatencyWindow",
    "OutcomeRecorder",
    "PlanBounds",
    "RateLimit",
    "TimeAsk",
    "TimeGrant",
    "TimedCall",
    "WindowRead",
    "allocate_budget",
    "best_attempt",
    "breaker_key",
    "censored_quantile",
    "counts_against_tool",
    "finish_curve",
    "hedge_key",
    "in_flight_key",
    "kill_overshoot_of",
    "plan_call",
    "plan_fixed_hedge",
    "plan_hedge",
    "planned_chain",
    "read_time_ask",
    "version_key",
    "window_key",
]

"""What a caller asks of a request's time, read once: `TimeAsk`, and the call the allocator weighs.

The scope stage reads it (`read_time_ask`) from the request's headers, its body's `budget` and
MCP `_meta`, in that order, and the allocator takes it as it is: the run's deadline
(`X-Conclave-Deadline`, `budget.deadline_ms`, `_meta` `conclave/deadline_ms`), the planned
calls after this one (`X-Conclave-Plan`, comma-separated tool names, this call first;
`budget.plan`; `_meta` `conclave/plan`), the time to keep in reserve (`X-Conclave-Reserve`,
`budget.reserve_ms`, `_meta` `conclave/reserve_ms`) and whether the caller lets a call be
hedged (`X-Conclave-Hedge: off`, `budget.hedge`, `_meta` `conclave/hedge`).

A deadline the gateway cannot read is refused at once (INVALID_REQUEST). A plan is bounded
before anything is done with it (`PlanBounds`): more names than `budget_plan_max`, or a name
longer than a served tool name can be, is refused INVALID_REQUEST naming the limit, before the
admission script reads a window for it (every planned name costs a window read in Redis and a
summary on the event loop). Such a refusal, or a reserve that is not a number of ms, is kept
in the ask and raised when a tool call's time is weighed: a request that is not a tool call,
or a call refused earlier, is answered as if the plan were not there.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sized
from dataclasses import dataclass
from typing import Any

from gateway.gateway_error import GatewayError
from protocol import (
    DEADLINE_HEADER,
    HEDGE_HEADER,
    PLAN_HEADER,
    RESERVE_HEADER,
    Budget,
    ErrorCode,
    Principal,
)
from tools import RegisteredTool

META_DEADLINE_KEYS = ("conclave/deadline_ms", "deadline_ms")
META_PLAN_KEY = "conclave/plan"
META_RESERVE_KEY = "conclave/reserve_ms"
META_HEDGE_KEY = "conclave/hedge"


@dataclass(frozen=True)
class TimeAsk:
    """A request's deadline, plan, reserve and hedging consent, as its caller gave them."""

    deadline_ms: int | None = None  # unix ms
    plan: tuple[str, ...] = ()  # the planned tool names (bounded), this call first
    reserve_ms: int = 0  # kept back for the caller's own work (model turns)
    hedge: bool = True  # False: the caller said never to start a second attempt
    # A plan or reserve the gateway does not take: raised when a tool call's time is weighed.
    refusal: GatewayError | None = None


@dataclass(frozen=True, slots=True)
class DelegatedCall:
    """A request that hands work to an A2A agent (SendMessage), as ATBA plans it: a call with
    a latency window of its own, `window` (`a2a:<agent>`: no tool name holds a colon, so a
    plan may name it beside tools), and the agent's `timeout_s` as its declared timeout."""

    window: str
    timeout_ms: int


@dataclass(frozen=True, slots=True)
class TimedCall:
    """A request as the time allocator sees it: who asks, for which tool, and what they ask."""

    principal: Principal
    tool: RegisteredTool | None  # None: not a tool call (state operations, listings)
    asked_ms: int | None  # the caller's own timeout for the call (`limits.timeout_ms`)
    ask: TimeAsk
    delegation: DelegatedCall | None = None  # an A2A agent's SendMessage (tool is None)


@dataclass(frozen=True)
class PlanBounds:
    """How long a plan may be (names) and how long each of its names (characters)."""

    max_names: int = 64
    max_name_chars: int = 64  # a served tool name's own limit (docs/tools.md)

    def check(self, names: Sized, where: str) -> None:
        if len(names) > self.max_names:
            raise _plan_refused(where, f"at most {self.max_names} names, got {len(names)}")

    def check_text(self, raw: str, where: str) -> None:
        """A comma-separated plan, refused by its length before it is split."""
        if len(raw) > self.max_names * (self.max_name_chars + 1):
            raise _plan_refused(
                where, f"at most {self.max_names} names of {self.max_name_chars} characters"
            )

    def names(self, raw: Iterable[object], where: str) -> list[str]:
        plan = [str(name) if not isinstance(name, str) else name.strip() for name in raw]
        plan = [name for name in plan if name]
        self.check(plan, where)
        for name in plan:
            if len(name) > self.max_name_chars:
                raise _plan_refused(
                    where, f"each name at most {self.max_name_chars} characters, got {len(name)}"
                )
        return plan


def read_time_ask(
    headers: Mapping[str, str],
    budget: Budget | None,
    meta: Mapping[str, Any] | None,
    bounds: PlanBounds,
) -> TimeAsk:
    """What the caller asked, from headers (keys lower-case), body `budget` and MCP `_meta`;
    raises INVALID_REQUEST for a deadline it cannot read."""
    meta = meta or {}
    deadline = _deadline(headers, budget, meta)
    hedge = _hedge_consent(headers, budget, meta)
    try:
        plan, reserve = _plan_of(headers, budget, meta, bounds)
    except GatewayError as refused:
        return TimeAsk(deadline, hedge=hedge, refusal=refused)
    return TimeAsk(deadline, tuple(plan), reserve, hedge)


def _deadline(
    headers: Mapping[str, str], budget: Budget | None, meta: Mapping[str, Any]
) -> int | None:
    raw = headers.get(DEADLINE_HEADER.lower())
    if raw is not None:
        try:
            value = int(raw)
        except ValueError:
            value = 0
        if value <= 0:
            raise GatewayError.of(
                ErrorCode.INVALID_REQUEST,
                f"{DEADLINE_HEADER} must be a positive unix time in milliseconds",
                param_hints={DEADLINE_HEADER: f"got {raw!r}"},
            )
        return value
    if budget is not None and budget.deadline_ms is not None:
        return budget.deadline_ms
    for key in META_DEADLINE_KEYS:
        found = meta.get(key)
        if isinstance(found, int) and not isinstance(found, bool) and found > 0:
            return found
    return None


def _hedge_consent(
    headers: Mapping[str, str], budget: Budget | None, meta: Mapping[str, Any]
) -> bool:
    if headers.get(HEDGE_HEADER.lower(), "").strip().lower() in ("off", "0", "false"):
        return False
    if budget is not None and not budget.hedge:
        return False
    return meta.get(META_HEDGE_KEY) is not False


def _plan_of(
    headers: Mapping[str, str],
    budget: Budget | None,
    meta: Mapping[str, Any],
    bounds: PlanBounds,
) -> tuple[list[str], int]:
    """(planned tool names, reserve ms) from headers, body or MCP `_meta`, in that order;
    each source bounded before its names are looked at."""
    plan: list[str] = []
    reserve: int | None = None
    header_plan = headers.get(PLAN_HEADER.lower())
    if header_plan is not None:
        bounds.check_text(header_plan, PLAN_HEADER)
        plan = bounds.names(header_plan.split(","), PLAN_HEADER)
    header_reserve = headers.get(RESERVE_HEADER.lower())
    if header_reserve is not None:
        reserve = _reserve_ms(header_reserve, RESERVE_HEADER)
    if budget is not None:
        if not plan:
            bounds.check(budget.plan, "budget.plan")
            plan = bounds.names(budget.plan, "budget.plan")
        reserve = reserve if reserve is not None else budget.reserve_ms
    if not plan:
        found = meta.get(META_PLAN_KEY)
        where = f"_meta.{META_PLAN_KEY}"
        if isinstance(found, list):
            bounds.check(found, where)
            plan = bounds.names(found, where)
        elif isinstance(found, str):
            bounds.check_text(found, where)
            plan = bounds.names(found.split(","), where)
    if reserve is None and META_RESERVE_KEY in meta:
        reserve = _reserve_ms(meta[META_RESERVE_KEY], f"_meta.{META_RESERVE_KEY}")
    return plan, reserve or 0


def _reserve_ms(raw: object, where: str) -> int:
    try:
        value = int(str(raw))
    except ValueError:
        value = -1
    if value < 0:
        raise GatewayError.of(
            ErrorCode.INVALID_REQUEST,
            f"{where} must be a non-negative number of milliseconds",
            param_hints={where: f"got {raw!r}"},
        )
    return value


def _plan_refused(where: str, limit: str) -> GatewayError:
    return GatewayError.of(
        ErrorCode.INVALID_REQUEST,
        f"{where} is longer than the gateway takes ({limit}): plan only the next calls",
        param_hints={where: limit},
    )


__all__ = [
    "META_DEADLINE_KEYS",
    "META_HEDGE_KEY",
    "META_PLAN_KEY",
    "META_RESERVE_KEY",
    "DelegatedCall",
    "PlanBounds",
    "TimeAsk",
    "TimedCall",
    "read_time_ask",
]

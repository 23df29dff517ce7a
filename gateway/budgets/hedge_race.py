"""Running a call ATBA chose to hedge: two attempts, the first answer wins.

The first attempt starts at once. If it has not answered after the plan's `after_ms`, and
the caller's identity still holds a hedge (`HedgeBudget.take`), a second attempt starts:
the same invocation marked `hedge` in its context, in another sandbox of the same identity
(each sandbox serves one call at a time), with what is left of the first's wall limit, so
both end where the grant ends and the hedge never reaches past the deadline. It takes a
free slot of the caller's own sandbox share or does not start (`Invocation.may_queue`).

The first *answer* wins: a result, or a failure of the tool's own. A timeout or a sandbox
that could not be had is no answer: the other attempt is waited for, and when neither
answers the first attempt's outcome is the call's. The other attempt is cancelled through
the sandbox pool's cancellation (its runner kills the call's process group; the sandbox
goes back warm once the runner answered), and the time it ran is recorded in the tool's
latency window as a censored sample: it would have taken at least that. Each attempt keeps
its own workspace: what the loser wrote stays in its sandbox.

What happened is a `HedgeReport`, which the audit record and the trace span show.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import Any, Literal

import anyio

from gateway.budgets.hedge_budget import HedgeBudget
from gateway.budgets.hedge_rule import HedgePlan
from gateway.budgets.latency_window import LatencyWindow
from protocol import ErrorCode
from tools.calls import NOT_RUN, Invocation, Outcome, ToolExecutor

Attempt = Literal["first", "hedge"]
_NO_ANSWER = NOT_RUN | {ErrorCode.TOOL_TIMEOUT, ErrorCode.DEADLINE_EXCEEDED}


@dataclass
class HedgeReport:
    """ATBA's decision for one call and, when it hedged, what became of the hedge."""

    plan: HedgePlan
    started: bool = False  # a second attempt ran
    not_started: str = ""  # why a planned hedge did not start (budget spent, no sandbox)
    winner: Attempt | Literal[""] = ""
    loser_ms: float | None = None  # how long the cancelled attempt ran (its censored sample)

    def summary(self) -> dict[str, Any]:
        """The audit record's `hedge`."""
        found: dict[str, Any] = {
            "decision": "hedge" if self.plan.hedges else "wait",
            "reason": self.plan.reason,
        }
        if self.plan.hedges:
            found |= {"after_ms": self.plan.after_ms, "started": self.started}
        if self.not_started:
            found["not_started"] = self.not_started
        if self.winner:
            found["winner"] = self.winner
        if self.loser_ms is not None:
            found["loser_ms"] = round(self.loser_ms, 1)
        return found

    def attributes(self) -> dict[str, str | int | bool]:
        """The trace span's attributes."""
        found: dict[str, str | int | bool] = {
            "conclave.hedge.decision": "hedge" if self.plan.hedges else "wait",
            "conclave.hedge.started": self.started,
        }
        if self.plan.after_ms is not None:
            found["conclave.hedge.after_ms"] = self.plan.after_ms
        if self.winner:
            found["conclave.hedge.winner"] = self.winner
        if self.not_started:
            found["conclave.hedge.not_started"] = self.not_started
        return found


def _answers(outcome: Outcome) -> bool:
    return outcome.error is None or outcome.error.code not in _NO_ANSWER


class HedgeRace:
    def __init__(self, executor: ToolExecutor, budget: HedgeBudget, window: LatencyWindow) -> None:
        self.executor = executor
        self.budget = budget
        self.window = window

    async def run(self, invocation: Invocation, report: HedgeReport) -> Outcome:
        """The call's outcome: the first answer of at most two attempts (see the module)."""
        after_ms = report.plan.after_ms
        assert after_ms is not None  # only a call ATBA chose to hedge races
        began = time.monotonic()
        outcomes: dict[Attempt, Outcome] = {}
        scopes: dict[Attempt, anyio.CancelScope] = {}
        ran_ms: dict[Attempt, float] = {}
        decided = anyio.Event()

        async def attempt(which: Attempt, call: Invocation) -> None:
            started = time.monotonic()
            with scopes[which]:
                outcome = await self.executor.execute(call)
                outcomes[which] = outcome
                if _answers(outcome) or len(outcomes) == len(scopes):
                    decided.set()
            ran_ms[which] = (time.monotonic() - started) * 1000

        async with anyio.create_task_group() as racing:
            scopes["first"] = anyio.CancelScope()
            racing.start_soon(attempt, "first", invocation)
            with anyio.move_on_after(after_ms / 1000):
                await decided.wait()
            if not decided.is_set():
                hedge = await self._hedge_of(invocation, began, report)
                if hedge is not None and decided.is_set():  # the first ended meanwhile
                    report.not_started, hedge = "the first attempt ended first", None
                if hedge is not None:
                    scopes["hedge"] = anyio.CancelScope()
                    report.started = True
                    racing.start_soon(attempt, "hedge", hedge)
            await decided.wait()
            for scope in scopes.values():
                scope.cancel()  # the loser, if still running: the pool's cancel kills it
        return await self._settle(invocation, outcomes, ran_ms, report)

    async def _hedge_of(
        self, invocation: Invocation, began: float, report: HedgeReport
    ) -> Invocation | None:
        """The second attempt, if the budget holds one and the grant leaves it any time."""
        left_ms = invocation.limits.timeout_ms - int((time.monotonic() - began) * 1000)
        if left_ms < 1:
            report.not_started = "the grant ran out first"
            return None
        principal = invocation.context.principal
        if not await self.budget.take(principal.tenant, principal.agent):
            report.not_started = "the identity's hedge budget is spent"
            return None
        left_ms = invocation.limits.timeout_ms - int((time.monotonic() - began) * 1000)
        return replace(
            invocation,
            context=invocation.context.model_copy(update={"hedge": True}),
            limits=replace(invocation.limits, timeout_ms=max(1, left_ms)),
            may_queue=False,
        )

    async def _settle(
        self,
        invocation: Invocation,
        outcomes: dict[Attempt, Outcome],
        ran_ms: dict[Attempt, float],
        report: HedgeReport,
    ) -> Outcome:
        winner: Attempt = next(
            (which for which, outcome in outcomes.items() if _answers(outcome)),
            "first" if "first" in outcomes else "hedge",
        )
        hedge = outcomes.get("hedge")
        if hedge is not None and hedge.error is not None and hedge.error.code in NOT_RUN:
            report.started = False  # it never ran: no sandbox of the caller's share was free
            report.not_started = hedge.error.message
        if report.started:
            report.winner = winner
            loser: Attempt = "hedge" if winner == "first" else "first"
            if loser not in outcomes and loser in ran_ms:
                report.loser_ms = ran_ms[loser]
                principal = invocation.context.principal
                with anyio.CancelScope(shield=True):  # the sample is owed even if cancelled
                    await self.window.record(
                        principal.tenant, invocation.tool, ran_ms[loser], censored=True
                    )
        return outcomes[winner]

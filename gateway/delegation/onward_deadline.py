"""The deadline a delegation carries to its agent: the caller's share of its run's time.

ATBA weighs a request handing an A2A agent work as a call (`gateway.budgets.DelegatedCall`):
it grants the delegation a share of what is left before the caller's deadline, after the
caller's reserve, the later planned calls and a margin for the answer to come back. That
share, as a unix-ms deadline, is what the agent is told (`X-Conclave-Deadline` to a remote
agent, the hosted task's deadline for a worker) and what the gateway waits for; the agent's
own tool calls and delegations draw from it in turn, so each hop hands the next a deadline
no later than its own. A request with no grant (no deadline, or a method that starts no
work) carries the run's deadline as it came.
"""

from __future__ import annotations

import time

from gateway.budgets import TimeAsk


def onward_deadline_ms(
    ask: TimeAsk,
    granted_ms: int | None,
    margin_ms: int | None = None,
    *,
    now_ms: float | None = None,
) -> int | None:
    """The deadline for the agent (unix ms) of a request whose caller asked `ask` and ATBA
    granted `granted_ms` with `margin_ms` for the answer: the grant from now, never past the
    run's deadline less the caller's reserve and that margin (the grant was weighed a moment
    before, so its `now` is a little earlier than this one)."""
    if ask.deadline_ms is None or granted_ms is None:
        return ask.deadline_ms
    now = time.time() * 1000 if now_ms is None else now_ms
    latest = ask.deadline_ms - ask.reserve_ms - (margin_ms or 0)
    return max(1, min(int(now) + granted_ms, latest))

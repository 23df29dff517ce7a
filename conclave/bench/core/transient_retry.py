"""A suite that stopped on a transient refusal runs again, as the SDK would retry the call.

A benchmark's figures come from many calls; one call that met a passing refusal (the Docker
engine not answering within its limit: `SANDBOX_UNAVAILABLE`, or any SERF error that is
retryable with `retry_same`/`retry_backoff`) after the SDK's own retries is no reason to lose
a suite's run. The suite is run again from its start after the SDK's backoff
(`agents.RecoveryPolicy.backoff_ms`: equal jitter, never below the gateway's
`retry_after_ms`), at most `SUITE_ATTEMPTS` times in all; any other failure, or the last
attempt's, is the suite's error as before. The suite's notes say each retry and why.
"""

from __future__ import annotations

from agents import GatewayCallError, RecoveryPolicy
from protocol import RecoveryAction, SerfError

SUITE_ATTEMPTS = 3
# A whole suite again, not one call: the engine needs seconds to come back, not milliseconds.
BASE_DELAY_MS = 2_000.0
MAX_DELAY_MS = 30_000.0
_RETRIED = (RecoveryAction.RETRY_SAME, RecoveryAction.RETRY_BACKOFF)


def suite_backoff(seed: int) -> RecoveryPolicy:
    """The SDK's policy, with delays for a whole suite run."""
    return RecoveryPolicy(
        max_attempts=SUITE_ATTEMPTS,
        base_delay_ms=BASE_DELAY_MS,
        max_delay_ms=MAX_DELAY_MS,
        seed=seed,
    )


def transient_refusal(exc: BaseException) -> SerfError | None:
    """The retryable SERF error that stopped the suite, found in the exception, its causes
    or an exception group's members; None when the failure is of another kind."""
    seen: set[int] = set()
    pending: list[BaseException] = [exc]
    while pending:
        current = pending.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        serf = current.serf if isinstance(current, GatewayCallError) else None
        if serf is not None:
            return serf if serf.retryable and serf.action in _RETRIED else None
        if isinstance(current, BaseExceptionGroup):
            pending.extend(current.exceptions)
        pending.extend(e for e in (current.__cause__, current.__context__) if e is not None)
    return None

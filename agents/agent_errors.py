"""The SDK's errors: everything the gateway refuses arrives as a `GatewayCallError` with its SERF.

Callers branch on `error.serf.code` or `error.serf.action`, never on the message. Transport
failures (gateway down, connection reset) and unreadable answers are translated here, in
one place, into SERF envelopes too, so the SDK has one way to fail.
"""

from __future__ import annotations

import httpx
from pydantic import ValidationError

from protocol import ErrorCode, RecoveryAction, SerfError


class AgentError(Exception):
    """Root of the SDK's errors."""


class GatewayCallError(AgentError):
    """The gateway (or the way to it) failed a request; `serf` says what to do next."""

    def __init__(self, serf: SerfError, status: int | None = None) -> None:
        super().__init__(f"{serf.code}: {serf.message}")
        self.serf = serf
        self.status = status

    @property
    def code(self) -> ErrorCode:
        return self.serf.code

    @property
    def action(self) -> RecoveryAction:
        return self.serf.action


class StateConflict(GatewayCallError):
    """A commit, lease or write lost to another agent (409): reread, reacquire, retry."""


def error_from_response(response: httpx.Response) -> GatewayCallError:
    """Read the SERF envelope the gateway answered with; a non-SERF body becomes one too."""
    try:
        serf = SerfError.model_validate(response.json())
    except (ValueError, ValidationError):
        serf = SerfError.of(
            ErrorCode.UPSTREAM_UNAVAILABLE if response.status_code >= 500 else ErrorCode.INTERNAL,
            f"the gateway answered {response.status_code} without a SERF envelope:"
            f" {response.text[:200]}",
        )
    cls = StateConflict if response.status_code == 409 else GatewayCallError
    return cls(serf, response.status_code)


def error_from_transport(exc: httpx.HTTPError, url: str) -> GatewayCallError:
    return GatewayCallError(
        SerfError.of(
            ErrorCode.UPSTREAM_UNAVAILABLE,
            f"the gateway at {url} is not reachable ({type(exc).__name__}): start it with"
            " 'conclave serve' or check the URL",
            retry_after_ms=500,
            action=RecoveryAction.RETRY_BACKOFF,
        )
    )


class RecoveryFailed(GatewayCallError):
    """The recovery policy gave up; `serf` is the last failure, `reason` why it stopped."""

    def __init__(self, serf: SerfError, *, attempts: int, reason: str) -> None:
        super().__init__(serf, serf.http_status)
        self.attempts = attempts
        self.reason = reason

    def __str__(self) -> str:
        return f"gave up after {self.attempts} attempt(s) ({self.reason}): {super().__str__()}"

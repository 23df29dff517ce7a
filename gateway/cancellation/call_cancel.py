"""`CallCancel`: one tool call's cancel switch, pulled by whoever learns its caller is gone.

A transport gives each tool call one (`RequestContext.cancel`); the pipeline runs the call's
stages inside the switch's cancel scope (`scope`), so pulling it (`cancel`) cancels whatever
the call awaits at that moment: the sandbox runner then kills the call's process group, an
`mcp_stdio` server is sent `notifications/cancelled`, an upstream's request is closed. Pulled
before the stages start, the scope is cancelled as it opens. The first reason is kept: it is
what the audit says.
"""

from __future__ import annotations

import time

import anyio

from protocol import ErrorCode, SerfError


class CallCancel:
    def __init__(self) -> None:
        self.reason: str | None = None  # why it was pulled; None while it is not
        self.pulled_at: float | None = None  # time.monotonic() when it was pulled
        self._scope: anyio.CancelScope | None = None

    @property
    def pulled(self) -> bool:
        return self.reason is not None

    def scope(self) -> anyio.CancelScope:
        """The scope the call's stages run in (one per call)."""
        self._scope = anyio.CancelScope()
        if self.reason is not None:
            self._scope.cancel()
        return self._scope

    def cancel(self, reason: str) -> None:
        """Stop the call for `reason`; a second pull changes nothing."""
        if self.reason is not None:
            return
        self.reason, self.pulled_at = reason, time.monotonic()
        if self._scope is not None:
            self._scope.cancel()

    def error(self) -> SerfError:
        """What the call answers (and the audit records) once the switch stopped it."""
        return SerfError.of(
            ErrorCode.CANCELLED,
            f"the call was cancelled ({self.reason}); its work was stopped",
            details={"reason": self.reason or ""},
        )


__all__ = ["CallCancel"]

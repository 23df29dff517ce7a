"""When no sandbox can be had: the caller's SERF envelope, built in this one place.

The sandbox package's own errors (`SandboxError`: a full or closed pool, a start that
failed, a missing runtime image) and the Docker SDK's exceptions (translated by the docker
backend, their one translation on the call path) become `SANDBOX_UNAVAILABLE`: retryable after a
short wait, or `abort` when no retry can mend it. The pool answers calls with it, and the
gateway's `translate` asks here for anything the sandbox layer let out.
"""

from __future__ import annotations

from docker.errors import DockerException

from protocol import ErrorCode, RecoveryAction, SerfError
from sandbox.backend import SandboxError


def unavailable_error(exc: BaseException) -> SerfError | None:
    """The envelope for a sandbox that cannot be had, or None when `exc` is not about one."""
    if isinstance(exc, DockerException):
        from sandbox.backends.docker import sandbox_error_from_docker

        exc = sandbox_error_from_docker(exc)
    if not isinstance(exc, SandboxError):
        return None
    if exc.retry_after_ms is None:  # nothing a retry can mend, say a missing runtime image
        return SerfError.of(ErrorCode.SANDBOX_UNAVAILABLE, str(exc), action=RecoveryAction.ABORT)
    return SerfError.of(ErrorCode.SANDBOX_UNAVAILABLE, str(exc), retry_after_ms=exc.retry_after_ms)

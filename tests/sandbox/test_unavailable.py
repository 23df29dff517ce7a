"""A sandbox that cannot be had answers one way, from the pool and the gateway alike."""

from __future__ import annotations

from docker.errors import DockerException, ImageNotFound

from protocol import ErrorCode, RecoveryAction
from sandbox import PoolFullError, RuntimeImageMissing, SandboxStartError, unavailable_error


def test_a_full_pool_is_retried_soon_and_a_failed_start_a_little_later() -> None:
    full = unavailable_error(PoolFullError("all 2 sandboxes are busy"))
    start = unavailable_error(SandboxStartError("the runner did not connect"))
    assert full is not None and start is not None
    assert (full.code, full.retry_after_ms) == (ErrorCode.SANDBOX_UNAVAILABLE, 250)
    assert (start.code, start.retry_after_ms) == (ErrorCode.SANDBOX_UNAVAILABLE, 1000)


def test_a_missing_image_says_abort_and_how_to_build_it() -> None:
    named = unavailable_error(RuntimeImageMissing("run 'conclave sandbox build-image'"))
    assert named is not None and named.action is RecoveryAction.ABORT
    from_docker = unavailable_error(ImageNotFound("no such image"))  # the SDK's own exception
    assert from_docker is not None and from_docker.action is RecoveryAction.ABORT
    assert "build-image" in from_docker.message


def test_docker_failures_name_the_engine_fix_and_other_errors_are_not_its_business() -> None:
    engine = unavailable_error(DockerException("connection refused"))
    assert engine is not None and "dockerd" in engine.message
    assert unavailable_error(ValueError("unrelated")) is None

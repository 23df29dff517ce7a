"""The embedded stack brings up real Redis and a real gateway process, and leaves nothing."""

from __future__ import annotations

import os

import httpx
import pytest

from conclave.stack import EmbeddedStack
from gateway.config import Settings

pytestmark = pytest.mark.system  # starts stacks or engines in its tests' bodies


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_stack_serves_and_tears_down() -> None:
    stack = EmbeddedStack(Settings(port=0, sandbox_backend="process"))
    with stack:
        assert httpx.get(f"{stack.url}/healthz").status_code == 200
        ready = httpx.get(f"{stack.url}/readyz").json()
        assert ready == {"status": "ready", "redis": "ok", "sandbox": "process"}
        assert stack.redis is not None and stack._gateways
        pids = [stack.redis._process.pid, stack._gateways[0].pid]  # type: ignore[union-attr]
        url = stack.url
    assert not any(_alive(pid) for pid in pids)
    try:
        httpx.get(f"{url}/healthz", timeout=1)
        raise AssertionError("the gateway still answers after stop()")
    except httpx.TransportError:
        pass


def test_stack_picks_a_backend_and_says_why() -> None:
    with EmbeddedStack(Settings(port=0)) as stack:
        assert stack.backend is not None
        assert stack.backend.name in ("docker", "bwrap", "process")
        assert stack.backend.reason

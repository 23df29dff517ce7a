"""The real stack for end-to-end tests: the gateway under uvicorn in its own process."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from conclave.stack import EmbeddedStack
from gateway.settings import Settings

# Small limits so the size and flood tests stay quick; each test uses its own agents, so one
# test's bucket never limits another's.
# An agent may hold as many sandboxes as its burst admits calls: the flood test measures the
# rate limiter, not the sandbox share (tests/security/test_sandbox_fairness.py does that).
E2E_LIMITS = {
    "max_body_bytes": 4096,
    "rate_limit_per_s": 1.0,
    "rate_limit_burst": 10,
    "sandbox_agent_max": 12,
}


@pytest.fixture(scope="module")
def stack(redis_url: str, sandbox_backend: str) -> Iterator[EmbeddedStack]:
    settings = Settings(
        redis_url=redis_url,
        port=0,
        sandbox_backend=sandbox_backend,
        secret="e2e-secret-" + "x" * 32,
        admin_key="e2e-admin-key",
        **E2E_LIMITS,
    )
    with EmbeddedStack(settings) as running:
        yield running

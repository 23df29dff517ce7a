"""The real stacks for end-to-end tests: the gateway under uvicorn in its own process, alone
(`stack`, once per sandbox backend) or with an MCP upstream federated behind it
(`federated_stack`, for the client matrix)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conclave.bench.mcp.mcp_upstream import running_upstream
from conclave.stack import EmbeddedStack
from gateway.config import Settings

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
# The federated stack's `mcp_http` source: the upstream test server
# (conclave.bench.mcp.mcp_upstream) under this name, so its tools are served as `notes__echo`,
# ... and its resource `notes://readme` reaches the agents whose scopes cover `tool:notes.*`.
UPSTREAM_SOURCE = "notes"
FEDERATED_ADMIN_KEY = "federated-admin-key"


def e2e_settings(redis_url: str, sandbox_backend: str, **fields: Any) -> Settings:
    """An end-to-end stack's settings: a free port, fixed secrets, and `fields` on top."""
    return Settings(
        redis_url=redis_url,
        port=0,
        sandbox_backend=sandbox_backend,
        secret="e2e-secret-" + "x" * 32,
        admin_key="e2e-admin-key",
        **fields,
    )


@pytest.fixture(scope="module")
def stack(redis_url: str, sandbox_backend: str) -> Iterator[EmbeddedStack]:
    with EmbeddedStack(e2e_settings(redis_url, sandbox_backend, **E2E_LIMITS)) as running:
        yield running


@pytest.fixture(scope="module")
def federated_stack(
    redis_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[EmbeddedStack]:
    """The built-in tools and the upstream test server as the `mcp_http` source `notes`.

    The clients in front are what the matrix tests, not the sandbox: tools run on the
    process backend (tests/e2e's other modules run each backend)."""
    with running_upstream() as upstream_url:
        config = Path(tmp_path_factory.mktemp("federated")) / "conclave.toml"
        config.write_text(
            f'[[source]]\nname = "{UPSTREAM_SOURCE}"\nkind = "mcp_http"\nurl = "{upstream_url}"\n'
        )
        settings = Settings(
            redis_url=redis_url,
            port=0,
            sandbox_backend="process",
            config=config,
            secret="federated-secret-" + "f" * 32,
            admin_key=FEDERATED_ADMIN_KEY,
        )
        with EmbeddedStack(settings) as running:
            yield running

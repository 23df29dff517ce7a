"""Shared fixtures: a real Redis, settings, the gateway app in-process, engine checks."""

from __future__ import annotations

import os
import tempfile
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import httpx
import pytest
from redis.asyncio import Redis

from conclave.bench.mcp.conformance_cli import (
    NODE_TOOLS,
    PINNED_VERSIONS,
    REPO_ROOT,
    ConformanceSuite,
    ConformanceUnavailable,
    node_tools,
)
from conclave.stack.embedded_redis import EmbeddedRedis
from gateway.config import Settings
from gateway.redis_io import connect_redis
from sandbox.backends.detect import bwrap_status, docker_status
from tests.helpers import in_process_gateway
from tests.tiers import pytest_collection_modifyitems  # noqa: F401 (the tiers' hook)

IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
# A test that needs Docker or bubblewrap and finds it missing fails, unless skips were allowed
# (`bash .ci/test --allow-skip`, which sets this); CI never allows them.
ALLOW_SKIP = not IN_CI and os.environ.get("CONCLAVE_ALLOW_SKIP", "") == "1"
# The backends the end-to-end suites run their tools on: each suite runs once per backend.
SANDBOX_BACKENDS = ("process", "docker", "bwrap")

# Secrets a test does not configure are generated in this run's own data directory (here
# and in every process a test starts), never in the user's.
os.environ.setdefault("CONCLAVE_DATA_DIR", tempfile.mkdtemp(prefix="conclave-test-data-"))
# An xdist worker's environment carries COLUMNS=80 and LINES=24, which a plain pytest's does
# not: the commands tests start would lay their tables out for 80 columns and cut rows a test
# reads (`conclave bench` output). Dropped, a worker's commands print as under plain pytest.
if "PYTEST_XDIST_WORKER" in os.environ:
    for name in ("COLUMNS", "LINES"):
        os.environ.pop(name, None)
TEST_SECRETS = {"secret": "test-secret-" + "x" * 32, "admin_key": "test-admin-key"}


@pytest.fixture(scope="session")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="session")
def redis_url() -> Iterator[str]:
    """A real Redis: REDIS_URL when set, else an embedded server for this test session."""
    url = os.environ.get("REDIS_URL")
    if url:
        yield url
        return
    with EmbeddedRedis(persist=False) as server:
        yield server.url


@pytest.fixture
def settings(redis_url: str) -> Settings:
    return Settings(
        redis_url=redis_url,
        port=0,
        sandbox_backend="process",
        allowed_hosts=("gateway",),  # the `client` fixture's base URL
        **TEST_SECRETS,
    )


@pytest.fixture
async def redis(redis_url: str) -> AsyncIterator[Redis]:
    client = connect_redis(redis_url)
    await client.flushdb()
    yield client
    await client.aclose()


@pytest.fixture
async def client(settings: Settings, redis: Redis) -> AsyncIterator[httpx.AsyncClient]:
    """The gateway in-process over httpx's ASGI transport (lifespan included)."""
    async with in_process_gateway(settings) as c:
        yield c


def _need(what: str, missing: str | None) -> None:
    if missing is None:
        return
    if not ALLOW_SKIP:
        pytest.fail(f"{what} is required (bash .ci/test --allow-skip skips instead): {missing}")
    pytest.skip(f"{what} unavailable: {missing}")


@pytest.fixture(scope="session")
def docker_engine() -> str:
    """The Docker host to use; fails in CI and skips elsewhere when the engine is missing."""
    settings = Settings()
    _need("Docker", docker_status(settings.docker_host, settings.sandbox.image))
    return settings.docker_host


@pytest.fixture(scope="session")
def bwrap_available() -> None:
    _need("bubblewrap", bwrap_status())


@pytest.fixture(scope="session")
def conformance_installed() -> None:
    """The pinned MCP conformance suites (every version in PINNED_VERSIONS) and their Node
    22, from `.ci/lib.sh`'s install_node_tools; fails in CI and skips elsewhere when missing."""
    for version in PINNED_VERSIONS:
        try:
            node_tools(ConformanceSuite(version=version))
        except ConformanceUnavailable as exc:
            _need("the MCP conformance suite", str(exc))


@pytest.fixture(scope="session")
def client_env_python() -> Callable[[str], Path]:
    """The interpreter of an MCP client's own venv (`.client-envs/<name>`, from
    `tests/e2e/clients/<name>.txt` by `.ci/lib.sh`'s install_client_envs); a missing one fails
    in CI and skips elsewhere."""

    def python(name: str) -> Path:
        interpreter = REPO_ROOT / ".client-envs" / name / "bin" / "python"
        missing = None
        if not interpreter.exists():
            hint = "bash -c 'source .ci/lib.sh && install_client_envs'"
            missing = f"the {name} client venv is not installed at {interpreter}: run {hint}"
        _need(f"the {name} MCP client", missing)
        return interpreter

    return python


@pytest.fixture(scope="session")
def inspector_bin() -> Path:
    """The folder holding MCP Inspector's `mcp-inspector` and the Node 22 it runs on (from
    `.ci/lib.sh`'s install_node_tools); put it first on PATH. Fails in CI, skips elsewhere
    when missing."""
    folder = NODE_TOOLS / "inspector" / "node_modules" / ".bin"
    missing = None
    if not (folder / "mcp-inspector").exists() or not (folder / "node").exists():
        hint = "bash -c 'source .ci/lib.sh && install_node_tools'"
        missing = f"MCP Inspector is not installed under {folder}: run {hint}"
    _need("MCP Inspector", missing)
    return folder


@pytest.fixture(scope="module", params=SANDBOX_BACKENDS)
def sandbox_backend(request: pytest.FixtureRequest) -> str:
    """A module's sandbox backend, one of `SANDBOX_BACKENDS` (the engine checked first)."""
    name: str = request.param
    if name == "docker":
        request.getfixturevalue("docker_engine")
    elif name == "bwrap":
        request.getfixturevalue("bwrap_available")
    return name

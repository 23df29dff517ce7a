"""What many test files need, written once: waiting on a condition within a time limit,
registering an agent, the gateway in-process (tests/README.md says when to use which), and
running a documented command as a reader does.

A wait here never sleeps for a fixed time: it polls its condition until it holds, and fails
with what it waited for once its time limit passes.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any, TypeVar

import anyio
import httpx

from gateway.assembly import create_app
from gateway.config import Settings
from protocol import ADMIN_KEY_HEADER

T = TypeVar("T")


def wait_for(
    condition: Callable[[], bool], timeout_s: float, what: str, poll_s: float = 0.05
) -> None:
    """Block until `condition()` holds; an assertion naming `what` after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"not within {timeout_s} s: {what}"
        time.sleep(poll_s)


async def until(condition: Callable[[], bool], timeout_s: float, poll_s: float = 0.005) -> None:
    """Await until `condition()` holds; TimeoutError after `timeout_s`."""
    with anyio.fail_after(timeout_s):
        while not condition():  # noqa: ASYNC110 (a condition to poll, not an event to await)
            await anyio.sleep(poll_s)


async def until_true(
    check: Callable[[], Awaitable[T]], timeout_s: float, poll_s: float = 0.02
) -> T:
    """Await `check()` until it answers something true, and return that; TimeoutError after
    `timeout_s` (for conditions only an awaited read can tell, such as Redis's or an API's)."""
    with anyio.fail_after(timeout_s):
        while not (found := await check()):  # noqa: ASYNC110 (a read to poll, no event)
            await anyio.sleep(poll_s)
    return found


def admin_headers(settings: Settings) -> dict[str, str]:
    """The headers that carry `settings`' admin key."""
    return {ADMIN_KEY_HEADER: settings.admin_key.get_secret_value()}


async def register(
    client: httpx.AsyncClient, admin: dict[str, str], tenant: str, agent: str, **rights: Any
) -> httpx.Response:
    """POST /v1/agents as the admin; the gateway's answer, whatever it is."""
    body = {"tenant": tenant, "agent": agent, **rights}
    return await client.post("/v1/agents", json=body, headers=admin)


async def registered_token(
    client: httpx.AsyncClient, admin: dict[str, str], tenant: str, agent: str, **rights: Any
) -> str:
    """Register an agent that must be accepted (201); its bearer token."""
    answer = await register(client, admin, tenant, agent, **rights)
    assert answer.status_code == 201, answer.text
    token: str = answer.json()["token"]
    return token


@asynccontextmanager
async def in_process_gateway(
    settings: Settings, base_url: str = "http://gateway"
) -> AsyncIterator[httpx.AsyncClient]:
    """The gateway in-process over httpx's ASGI transport (lifespan included)."""
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url=base_url) as client:
            yield client


@asynccontextmanager
async def in_process_replicas(
    settings: Settings, count: int = 2
) -> AsyncIterator[list[httpx.AsyncClient]]:
    """`count` gateway replicas in-process on one Redis, a client each (lifespans included)."""
    async with AsyncExitStack() as stack:
        clients = []
        for _ in range(count):
            clients.append(await stack.enter_async_context(in_process_gateway(settings)))
        yield clients


ROOT = Path(__file__).resolve().parents[1]


def documented_example(page: str, name: str) -> str:
    """The fenced block of `page` (e.g. "docs/agents.md") under `<!-- example: NAME -->`."""
    text = (ROOT / page).read_text()
    found = re.search(rf"<!-- example: {re.escape(name)} -->\n```\w*\n(.*?)```", text, re.S)
    assert found, f"{page} has no block marked <!-- example: {name} -->"
    return found.group(1)


def run_documented(block: str, cwd: Path, timeout_s: float) -> subprocess.CompletedProcess[str]:
    """A documented bash block run as a reader runs it (`bash -euo pipefail`, in `cwd`, no
    CONCLAVE_* variable but the test run's data directory), with this interpreter's
    environment first on PATH (its `conclave`) and wide tables."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CONCLAVE_")}
    env["CONCLAVE_DATA_DIR"] = os.environ["CONCLAVE_DATA_DIR"]  # the run's, not the user's
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    return subprocess.run(
        ["bash", "-euo", "pipefail", "-c", block],
        cwd=cwd,
        env={**env, "COLUMNS": "240"},
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
    )


def serf_in(body: Any) -> tuple[dict[str, Any], str | None]:
    """The SERF envelope an error body carries, wherever its protocol puts it, and the A2A
    error's reason when there is one: the body itself (REST), a JSON-RPC error's `data` (an
    object on /mcp, an array of typed details on /a2a), or an HTTP+JSON error's `details`
    (/a2a/.../rest)."""
    error = body.get("error") if isinstance(body, dict) else None
    if not isinstance(error, dict):
        return body, None
    details = error.get("data", error.get("details"))
    if isinstance(details, dict):
        return details, None
    typed = [d for d in details or [] if isinstance(d, dict)]
    serf = next(d for d in typed if str(d.get("@type", "")).endswith("conclave.SerfError"))
    reason = next((d["reason"] for d in typed if "reason" in d), None)
    return {k: v for k, v in serf.items() if k != "@type"}, reason

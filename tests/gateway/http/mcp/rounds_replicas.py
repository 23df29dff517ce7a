"""Two in-process gateway replicas on one Redis with the rounds fixture upstream as an
`mcp_http` source, and a transport that sends each request to the other replica: what the
input-rounds tests (tools, reads, prompts, tasks) share."""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Iterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

import httpx2
from pydantic import HttpUrl

from conclave.bench.core import running_child_server
from conclave.stack.ports import free_port
from gateway.assembly import create_app
from gateway.config import Settings
from gateway.identity.tokens import issue_token
from tools.sources import McpHttpSource

VERSION = "2026-07-28"


def running_rounds_upstream() -> Iterator[str]:
    """`tools.harness.input_rounds_server` in a child process; its `/mcp` URL."""
    port = free_port()
    with running_child_server(["tools.harness.input_rounds_server", "--port", str(port)], port):
        yield f"http://127.0.0.1:{port}/mcp"


@asynccontextmanager
async def replicas(
    settings: Settings, url: str, wire: str = VERSION, name: str = "rt"
) -> AsyncIterator[list[Any]]:
    """Two gateway apps, lifespans entered, serving the upstream at `url` as source `name`."""
    source = McpHttpSource(kind="mcp_http", name=name, url=HttpUrl(url), wire=wire)
    async with AsyncExitStack() as stack:
        apps = []
        for _ in range(2):
            app = create_app(settings, sources=(source,))
            await stack.enter_async_context(app.router.lifespan_context(app))
            apps.append(app)
        yield apps


def bearer(settings: Settings, tenant: str, agent: str) -> dict[str, str]:
    token = issue_token(settings, tenant=tenant, agent=agent, scopes=("tool:*",))
    return {"Authorization": f"Bearer {token}"}


class Alternating(httpx2.AsyncBaseTransport):
    """Each request to the next replica in turn: no round meets the replica of the last."""

    def __init__(self, *apps: Any) -> None:
        self._next = itertools.cycle([httpx2.ASGITransport(app=app) for app in apps])

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        return await next(self._next).handle_async_request(request)

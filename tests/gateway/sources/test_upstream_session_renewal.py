"""An `mcp_http` upstream that forgets the gateway's session (it restarted, or the session
expired) is initialized again inline: the next call succeeds at once, it does not fail with
UPSTREAM_UNAVAILABLE while the gateway reconnects."""

from __future__ import annotations

from contextlib import ExitStack

import httpx
import pytest
from pydantic import HttpUrl
from redis.asyncio import Redis

from conclave.bench.mcp.mcp_upstream import running_upstream
from conclave.stack.ports import free_port
from gateway.assembly import create_app
from gateway.config import Settings
from gateway.identity.tokens import issue_token
from tools.sources import McpHttpSource

pytestmark = pytest.mark.anyio


async def test_a_restarted_upstream_gets_a_new_session_on_the_next_call(
    settings: Settings, redis: Redis
) -> None:
    port = free_port()
    source = McpHttpSource(
        kind="mcp_http", name="up", url=HttpUrl(f"http://127.0.0.1:{port}/mcp"), sessions=2
    )
    token = issue_token(settings, tenant="fed", agent="caller", scopes=("tool:up.*",))
    headers = {"Authorization": f"Bearer {token}"}
    with ExitStack() as first:
        first.enter_context(running_upstream(port=port, stateful=True))
        app = create_app(settings, sources=[source])
        async with (
            app.router.lifespan_context(app),
            httpx.AsyncClient(
                transport=httpx.ASGITransport(app=app), base_url="http://gateway"
            ) as client,
        ):

            async def echo(message: str) -> httpx.Response:
                body = {"arguments": {"message": message}}
                return await client.post("/v1/tools/up.echo/call", json=body, headers=headers)

            for message in ("one", "two"):  # both sessions of the pool used
                assert (await echo(message)).json()["result"] == message
            first.close()  # the upstream goes, and with it every session it issued
            with running_upstream(port=port, stateful=True):
                for message in ("back", "again", "and again"):
                    answer = await echo(message)
                    assert answer.status_code == 200, answer.text
                    assert answer.json()["result"] == message

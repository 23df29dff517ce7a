"""A streamed call stops when its client goes away, over real HTTP (the gateway under
uvicorn), on each sandbox backend: a `tools/call` answered as an event stream (its tool
reported progress) whose client closes the connection mid-stream has its processes killed,
as a plain call has.
"""

from __future__ import annotations

import json
import random
import uuid
from collections.abc import AsyncIterator, Iterator

import anyio
import httpx
import pytest

from conclave.stack import EmbeddedStack
from tests.e2e.conftest import e2e_settings
from tests.e2e.test_cancellation_e2e import _gone, _running, _started

pytestmark = [pytest.mark.anyio, pytest.mark.serial]  # flaky beside other system tests


async def _rest(lines: AsyncIterator[str]) -> list[str]:
    """What the stream says next (within a few seconds): why a call never started its
    process, when it did not."""
    said: list[str] = []
    with anyio.move_on_after(5):
        async for line in lines:
            said.append(line)
    return said


@pytest.fixture(scope="module")
def reporting_stack(redis_url: str, sandbox_backend: str) -> Iterator[EmbeddedStack]:
    modules = ("tools.builtin", "tools.harness.reporting")
    with EmbeddedStack(e2e_settings(redis_url, sandbox_backend, tool_modules=modules)) as running:
        yield running


async def test_a_client_leaving_a_streamed_call_stops_its_processes(
    reporting_stack: EmbeddedStack,
) -> None:
    marker = f"25.{random.randrange(10**9):09d}"
    token = reporting_stack.token("acme", f"s{uuid.uuid4().hex[:8]}", ["tool:progress_*"])
    headers = {
        "Authorization": f"Bearer {token}",
        "Accept": "application/json, text/event-stream",
    }
    params = {
        "name": "progress_then_sleep",
        "arguments": {"seconds": marker},
        "_meta": {"progressToken": "leaving"},
    }
    message = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}
    async with (
        httpx.AsyncClient(base_url=reporting_stack.url, timeout=30) as http,
        http.stream("POST", "/mcp", json=message, headers=headers) as answer,
    ):
        assert answer.headers["content-type"] == "text/event-stream"
        lines = answer.aiter_lines()
        async for line in lines:
            if line.startswith("data: "):
                first = json.loads(line[6:])
                break
        try:
            await _started(marker)
        except AssertionError as never_started:
            went_on = await _rest(lines)
            raise AssertionError(f"{never_started}; the stream went on: {went_on}") from None
    # The response was closed mid-stream: its connection went with it.
    assert first["method"] == "notifications/progress"
    assert first["params"]["progressToken"] == "leaving"
    await _gone(marker)
    assert not _running(marker)

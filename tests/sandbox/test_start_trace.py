"""A new identity's first call, traced through the in-process gateway on each backend: its
sandbox's start shows in the trace stage by stage (issue 43), under the call's execute span,
so the slow stage of a slow start is visible in the console; a warm call shows none.

Before: the execute span said only how long the call waited for a sandbox
(`conclave.sandbox.waited_ms`), not where that wait went.
"""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from redis.asyncio import Redis

from gateway import Settings, create_app, issue_token, start_tracing, stop_tracing
from tests.sandbox.conftest import ALL_BACKENDS

pytestmark = [pytest.mark.anyio, pytest.mark.parametrize("backend", ALL_BACKENDS)]

LAUNCH = {"docker": ["engine create", "engine start"], "bwrap": ["spawn"], "process": ["spawn"]}


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    start_tracing(provider)
    yield exporter
    stop_tracing()


def _id(span: ReadableSpan) -> int:
    assert span.context is not None
    return int(span.context.span_id)


def _parent(span: ReadableSpan) -> int | None:
    return span.parent.span_id if span.parent is not None else None


async def test_a_new_identitys_first_call_shows_its_sandboxs_start_by_stage(
    backend: str,
    request: pytest.FixtureRequest,
    settings: Settings,
    redis: Redis,
    spans: InMemorySpanExporter,
) -> None:
    request.getfixturevalue("docker_engine" if backend == "docker" else "bwrap_available")
    settings = settings.model_copy(update={"sandbox_backend": backend})
    token = issue_token(settings, tenant="acme", agent=f"new-{backend}", scopes=["tool:echo"])
    headers = {"Authorization": f"Bearer {token}"}
    body = {"arguments": {"message": "hi"}}
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://gateway") as client:
            first = await client.post("/v1/tools/echo/call", json=body, headers=headers)
            assert first.status_code == 200, first.text
            traced_first = spans.get_finished_spans()
            spans.clear()
            warm = await client.post("/v1/tools/echo/call", json=body, headers=headers)
            assert warm.status_code == 200, warm.text
            traced_warm = spans.get_finished_spans()

    by_name = {span.name: span for span in traced_first}
    execute, start = by_name["execute echo"], by_name["sandbox start"]
    assert _parent(start) == _id(execute)
    stages = [span for span in traced_first if _parent(span) == _id(start)]
    names = [span.name.removeprefix("sandbox ") for span in stages]
    assert sorted(names) == sorted([*LAUNCH[backend], "runner start", "tool import"])
    assert start.start_time is not None and start.end_time is not None
    assert execute.start_time is not None and execute.end_time is not None
    assert execute.start_time <= start.start_time <= start.end_time <= execute.end_time
    for stage in stages:
        assert stage.start_time is not None and stage.end_time is not None
        assert start.start_time <= stage.start_time <= stage.end_time <= start.end_time
    # The runner's own CPU in its stages: the interpreter and the runner, then the tools'.
    by_stage = {span.name: dict(span.attributes or {}) for span in stages}
    assert float(by_stage["sandbox runner start"]["conclave.sandbox.cpu_ms"]) > 0
    assert float(by_stage["sandbox tool import"]["conclave.sandbox.cpu_ms"]) > 0
    assert not [span for span in traced_warm if span.name.startswith("sandbox ")]
    assert "execute echo" in {span.name for span in traced_warm}

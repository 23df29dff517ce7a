"""OpenTelemetry traces, span by span: an agent's tool call on a Docker sandbox, an MCP upstream
call, the same over OTLP/HTTP from a gateway in its own process, and nothing at all when off.

The in-process gateway traces into an in-memory exporter (`start_tracing`); the agent SDK
traces with the process's global provider, the same one, so the agent's run and the gateway's
spans are checked as one trace.
"""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF, ParentBased, TraceIdRatioBased
from opentelemetry.trace import SpanKind, StatusCode
from pydantic import HttpUrl
from redis.asyncio import Redis

from agents import GatewayClient
from conclave.bench.mcp.mcp_upstream import running_upstream
from conclave.bench.overhead.otlp_receiver import OtlpReceiver
from conclave.stack import EmbeddedStack
from gateway import Settings, create_app, issue_token, start_tracing, stop_tracing
from gateway.delegation import NO_CHAIN, ChainSigner
from gateway.telemetry import encode_requests, tracing
from protocol import Principal
from tools.sources import McpHttpSource

pytestmark = pytest.mark.anyio

STAGES = ("authenticate", "scope", "authorize", "budget", "dispatch", "account")
_EXPORTER = InMemorySpanExporter()


@pytest.fixture(scope="module")
def provider() -> TracerProvider:
    """The process's global provider (set once per process), exporting into `_EXPORTER`."""
    current = trace.get_tracer_provider()
    if not isinstance(current, TracerProvider):
        current = TracerProvider()
        trace.set_tracer_provider(current)
    current.add_span_processor(SimpleSpanProcessor(_EXPORTER))
    return current


@pytest.fixture
def spans(provider: TracerProvider) -> Iterator[InMemorySpanExporter]:
    """The gateway traces into the exporter while the test runs."""
    _EXPORTER.clear()
    start_tracing(provider)
    yield _EXPORTER
    stop_tracing()


@asynccontextmanager
async def _gateway(settings: Settings, **sources: Any) -> AsyncIterator[Any]:
    app = create_app(settings, **sources)
    async with app.router.lifespan_context(app):
        yield app


def _by_name(finished: tuple[ReadableSpan, ...]) -> dict[str, ReadableSpan]:
    return {span.name: span for span in finished}


def _parent_of(span: ReadableSpan) -> int | None:
    return span.parent.span_id if span.parent is not None else None


def _id(span: ReadableSpan) -> int:
    context = span.context
    assert context is not None
    return int(context.span_id)


@pytest.mark.docker
async def test_an_agents_tool_call_on_docker_is_one_trace_span_by_span(
    settings: Settings, redis: Redis, docker_engine: str, spans: InMemorySpanExporter
) -> None:
    settings = settings.model_copy(update={"sandbox_backend": "docker"})
    token = issue_token(settings, tenant="acme", agent="tracer", scopes=["tool:run_python"])
    code = "import os\nos.environ.get('TRACEPARENT')"
    agent_tracer = trace.get_tracer("the-agent")
    async with _gateway(settings) as app:
        transport = httpx.ASGITransport(app=app)
        async with GatewayClient("http://gateway", token, transport=transport) as client:
            with agent_tracer.start_as_current_span("agent run") as run:
                answer = await client.call_tool("run_python", {"code": code})

    found = _by_name(spans.get_finished_spans())
    server = found["POST /v1/tools/run_python/call"]
    client_span = found["call run_python"]
    run_id = run.get_span_context().trace_id
    # One trace: the agent's run, the SDK's call, the gateway's request and everything under it.
    assert {span.context.trace_id for span in found.values() if span.context} == {run_id}
    assert answer.trace_id == f"{run_id:032x}"
    assert _parent_of(client_span) == run.get_span_context().span_id
    assert client_span.kind is SpanKind.CLIENT
    assert _parent_of(server) == _id(client_span) and server.kind is SpanKind.SERVER
    for stage in STAGES:
        assert _parent_of(found[f"stage {stage}"]) == _id(server), stage
    assert _parent_of(found["redis admission"]) == _id(found["stage budget"])
    assert _parent_of(found["redis outcome"]) == _id(found["stage account"])
    execute = found["execute run_python"]
    assert _parent_of(execute) == _id(found["stage dispatch"])

    assert server.attributes is not None and execute.attributes is not None
    assert server.attributes["http.response.status_code"] == 200
    assert server.attributes["conclave.tenant"] == "acme"
    assert server.attributes["conclave.agent"] == "tracer"
    assert server.attributes["conclave.tool"] == "run_python"
    assert (
        server.attributes["conclave.budget.granted_ms"]
        == execute.attributes["conclave.budget.granted_ms"]
    )
    # The runner's own timings, and the wait for a (here cold) Docker sandbox.
    assert str(execute.attributes["conclave.sandbox"]).startswith("docker:")
    assert execute.attributes["conclave.wall_ms"] == answer.usage.wall_ms
    assert execute.attributes["conclave.cpu_ms"] == answer.usage.cpu_ms
    assert float(execute.attributes["conclave.sandbox.waited_ms"]) > 0  # type: ignore[arg-type]
    assert execute.attributes["conclave.exit_reason"] == "ok"
    # The tool process continues the trace: its TRACEPARENT names the execute span.
    seen = str(answer.result["return_value"])
    assert seen.startswith(f"00-{run_id:032x}-{_id(execute):016x}-")
    # No span carries the agent's token.
    every_value = str([dict(span.attributes or {}) for span in found.values()])
    assert token not in every_value and token[-20:] not in every_value


async def test_a_refusal_marks_its_stage_and_request_with_the_serf_code(
    settings: Settings, redis: Redis, spans: InMemorySpanExporter
) -> None:
    token = issue_token(settings, tenant="acme", agent="narrow", scopes=["tool:echo"])
    async with _gateway(settings) as app:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://gateway") as client:
            refused = await client.post(
                "/v1/tools/run_python/call",
                json={"arguments": {"code": "1"}},
                headers={"Authorization": f"Bearer {token}"},
            )
    assert refused.status_code == 403
    code = refused.json()["code"]
    found = _by_name(spans.get_finished_spans())
    # Authorize finds the tool refused; budget raises it once admission has said the token is
    # current (a revoked token gets AUTH_REVOKED, never a hint of the tools served).
    for name in ("POST /v1/tools/run_python/call", "stage budget"):
        span = found[name]
        assert span.status.status_code is StatusCode.ERROR, name
        assert span.attributes is not None and span.attributes["conclave.error.code"] == code
    assert found["stage scope"].status.status_code is StatusCode.UNSET
    assert found["stage authorize"].status.status_code is StatusCode.UNSET
    assert "stage dispatch" not in found and "stage account" in found  # refused before it


async def test_a_call_made_for_another_agent_names_the_chain_on_its_span(
    settings: Settings, redis: Redis, spans: InMemorySpanExporter
) -> None:
    """A worker's call for the planner's task (its signed X-Conclave-Chain) says whom it was
    made for; a call of its own says nothing of the kind."""
    planner = Principal(tenant="acme", agent="planner", scopes=("tool:echo",), expires_at=0,
                        token_id="p")  # fmt: skip
    signer = ChainSigner(settings.secret.get_secret_value().encode())
    chain = signer.onward(NO_CHAIN, "helper", planner)
    token = issue_token(settings, tenant="acme", agent="helper", scopes=["tool:echo"])
    auth = {"Authorization": f"Bearer {token}"}
    async with _gateway(settings) as app:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://gateway") as client:
            body = {"arguments": {"message": "hi"}}
            for_planner = await client.post(
                "/v1/tools/echo/call", json=body, headers={**auth, "X-Conclave-Chain": chain}
            )
            assert for_planner.status_code == 200, for_planner.text
            found = _by_name(spans.get_finished_spans())["POST /v1/tools/echo/call"]
            spans.clear()
            own = await client.post("/v1/tools/echo/call", json=body, headers=auth)
            assert own.status_code == 200
    assert found.attributes is not None and found.attributes["conclave.chain"] == "acme/planner"
    alone = _by_name(spans.get_finished_spans())["POST /v1/tools/echo/call"]
    assert alone.attributes is not None and "conclave.chain" not in alone.attributes


@pytest.fixture(scope="module")
def upstream_url() -> Iterator[str]:
    with running_upstream() as url:
        yield url


async def test_an_mcp_upstream_receives_the_trace_context_of_its_span(
    settings: Settings, redis: Redis, upstream_url: str, spans: InMemorySpanExporter
) -> None:
    source = McpHttpSource(kind="mcp_http", name="up", url=HttpUrl(upstream_url))
    token = issue_token(settings, tenant="fed", agent="caller", scopes=["tool:up.*"])
    async with _gateway(settings, sources=[source]) as app:
        transport = httpx.ASGITransport(app=app)
        async with GatewayClient("http://gateway", token, transport=transport) as client:
            answer = await client.call_tool("up.traceparent_seen")
    found = _by_name(spans.get_finished_spans())
    upstream = found["mcp tools/call"]
    assert upstream.kind is SpanKind.CLIENT
    # Called by its dotted alias; the span names the tool by its served name.
    assert _parent_of(upstream) == _id(found["execute up__traceparent_seen"])
    assert upstream.context is not None
    trace_id = f"{upstream.context.trace_id:032x}"
    assert answer.trace_id == trace_id
    assert str(answer.result).startswith(f"00-{trace_id}-{_id(upstream):016x}-")


def _otel_env(monkeypatch: pytest.MonkeyPatch, endpoint: str, **more: str) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
    monkeypatch.setenv("OTEL_SERVICE_NAME", "conclave-under-test")
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "50")  # export within ms, not 5 s
    for name, value in more.items():
        monkeypatch.setenv(name, value)


def test_a_gateway_in_its_own_process_exports_over_otlp_http(
    redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = Settings(redis_url=redis_url, port=0, sandbox_backend="process")
    with OtlpReceiver() as receiver:
        _otel_env(monkeypatch, receiver.endpoint, OTEL_TRACES_EXPORTER="otlp")
        with EmbeddedStack(settings) as stack:
            token = stack.token("acme", "remote", ["tool:echo"])
            caller = "00-" + "ab" * 16 + "-" + "cd" * 8 + "-01"
            answer = httpx.post(
                f"{stack.url}/v1/tools/echo/call",
                json={"arguments": {"message": "hi"}},
                headers={"Authorization": f"Bearer {token}", "traceparent": caller},
            )
            assert answer.status_code == 200, answer.text
            received = receiver.wait_for("stage account")
    names = {span.name for span in received}
    assert {"POST /v1/tools/echo/call", "execute echo", "redis admission"} <= names
    assert {f"stage {stage}" for stage in STAGES} <= names
    assert {span.service for span in received} == {"conclave-under-test"}
    server = next(span for span in received if span.name == "POST /v1/tools/echo/call")
    assert server.trace_id == "ab" * 16 and server.parent_span_id == "cd" * 8
    assert server.attributes["conclave.agent"] == "remote"


async def test_tracing_off_makes_no_spans_and_no_exporter_thread(
    settings: Settings, redis: Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    with OtlpReceiver() as receiver:
        # An endpoint is configured, but the SDK is disabled: the standard off switch.
        _otel_env(monkeypatch, receiver.endpoint, OTEL_SDK_DISABLED="true")
        token = issue_token(settings, tenant="acme", agent="quiet", scopes=["tool:echo"])
        async with _gateway(settings) as app:
            transport = httpx.ASGITransport(app=app)
            async with GatewayClient("http://gateway", token, transport=transport) as client:
                answer = await client.call_tool("echo", {"message": "hi"})
            threads = [t.name for t in threading.enumerate()]
        assert answer.result == "hi" and len(answer.trace_id) == 32
        assert not [name for name in threads if name.startswith("OtelBatch")]
        assert receiver.wait_for("stage account", timeout_s=0.5) == []
        assert receiver.requests == 0


async def test_a_request_its_caller_did_not_sample_makes_no_spans_but_keeps_its_trace(
    settings: Settings, redis: Redis, spans: InMemorySpanExporter
) -> None:
    token = issue_token(settings, tenant="acme", agent="unsampled", scopes=["tool:echo"])
    caller = "00-" + "12" * 16 + "-" + "34" * 8 + "-00"  # flags 00: the caller does not sample
    async with _gateway(settings) as app:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://gateway") as client:
            answer = await client.post(
                "/v1/tools/echo/call",
                json={"arguments": {"message": "hi"}},
                headers={"Authorization": f"Bearer {token}", "traceparent": caller},
            )
    assert answer.status_code == 200 and answer.json()["trace_id"] == "12" * 16
    assert spans.get_finished_spans() == ()


async def test_the_otlp_bytes_decode_to_what_the_sdks_encoder_writes_for_the_same_spans(
    settings: Settings, redis: Redis, spans: InMemorySpanExporter, provider: TracerProvider
) -> None:
    """The gateway writes OTLP itself (`gateway.telemetry.otlp_wire`, the `otlp` exporter's
    path): the request it sends a collector is, message for message, the SDK encoder's."""
    recorded: list[Any] = []
    sink = tracing.TRACING._sink
    assert sink is not None
    handed_on = sink.export

    def export_both(request: Any, records: Any) -> None:
        recorded.append((request, records))
        handed_on(request, records)

    sink.export = export_both  # type: ignore[method-assign,assignment]
    token = issue_token(settings, tenant="acme", agent="wire", scopes=["tool:echo"])
    async with _gateway(settings) as app:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://gateway") as client:
            for caller in ("00-" + "ab" * 16 + "-" + "cd" * 8 + "-01", None):
                headers = {"Authorization": f"Bearer {token}"}
                if caller:
                    headers |= {"traceparent": caller, "tracestate": "vendor=1"}
                answer = await client.post(
                    "/v1/tools/echo/call", json={"arguments": {"message": "hi"}}, headers=headers
                )
                assert answer.status_code == 200
    finished = spans.get_finished_spans()
    # 10 spans a call, and the first call's sandbox start: its span and its 3 stages.
    assert len(finished) == 24 and sum(len(records) for _, records in recorded) == 24
    ours = ExportTraceServiceRequest.FromString(
        encode_requests(provider.resource, "conclave.gateway", recorded)
    )
    assert ours == encode_spans(finished)
    remote = [
        s for s in ours.resource_spans[0].scope_spans[0].spans if s.parent_span_id == b"\xcd" * 8
    ]
    assert len(remote) == 1 and remote[0].trace_state == "vendor=1"


async def test_a_request_the_sampler_leaves_out_makes_no_spans(
    settings: Settings, redis: Redis
) -> None:
    exporter = InMemorySpanExporter()
    never = TracerProvider(sampler=ALWAYS_OFF)
    never.add_span_processor(SimpleSpanProcessor(exporter))
    token = issue_token(settings, tenant="acme", agent="unsampled", scopes=["tool:echo"])
    start_tracing(never)
    try:
        async with _gateway(settings) as app:
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://gateway") as client:
                answer = await client.post(  # no traceparent: the sampler decides
                    "/v1/tools/echo/call",
                    json={"arguments": {"message": "hi"}},
                    headers={"Authorization": f"Bearer {token}"},
                )
    finally:
        stop_tracing()
    assert answer.status_code == 200 and len(answer.json()["trace_id"]) == 32
    assert exporter.get_finished_spans() == ()


async def test_a_ratio_sampler_traces_the_requests_the_sdk_would_and_only_those(
    settings: Settings, redis: Redis
) -> None:
    """The gateway decides a new trace's sampling by its id without asking the SDK's ratio
    sampler (`parentbased_traceidratio`): the traces it records are ones the SDK samples,
    and at one in two, 40 requests are neither all traced nor all left out (2^-39 odds)."""
    exporter = InMemorySpanExporter()
    sampler = ParentBased(TraceIdRatioBased(0.5))
    half = TracerProvider(sampler=sampler)
    half.add_span_processor(SimpleSpanProcessor(exporter))
    token = issue_token(settings, tenant="acme", agent="halved", scopes=["tool:echo"])
    start_tracing(half)
    try:
        async with _gateway(settings) as app:
            transport = httpx.ASGITransport(app=app)
            # A plain client: the agent SDK would send its own trace's `traceparent` (when the
            # process has a provider), and the gateway follows the caller's flag first.
            async with httpx.AsyncClient(transport=transport, base_url="http://gateway") as client:
                answers = [
                    await client.post(
                        "/v1/tools/echo/call",
                        json={"arguments": {"message": "hi"}},
                        headers={"Authorization": f"Bearer {token}"},
                    )
                    for _ in range(40)
                ]
    finally:
        stop_tracing()
    traced = {span.context.trace_id for span in exporter.get_finished_spans() if span.context}
    answered = {int(answer.json()["trace_id"], 16) for answer in answers}
    assert traced <= answered and 0 < len(traced) < 40
    for trace_id in traced:
        decision = sampler.should_sample(None, trace_id, "POST /v1/tools/echo/call")
        assert decision.decision.is_sampled()


async def test_a_hedged_call_says_so_on_its_execute_span(
    settings: Settings, redis: Redis, bwrap_available: None, spans: InMemorySpanExporter
) -> None:
    """After twenty quick calls (one hedge earned, the p95 tens of ms), a call whose first
    attempt sleeps: its span says ATBA hedged it, when, and that the hedge won. The quick
    calls sleep 10 ms: below a hedge's start (5 ms) a tool is never hedged, and a quiet run
    measured plain calls at 2-5 ms."""
    settings = settings.model_copy(
        update={"sandbox_backend": "bwrap", "tool_modules": ("tools.harness.hedging",)}
    )
    token = issue_token(settings, tenant="acme", agent="hedger", scopes=["tool:slow_first"])
    async with _gateway(settings) as app:
        transport = httpx.ASGITransport(app=app)
        async with GatewayClient("http://gateway", token, transport=transport) as client:
            for index in range(20):
                await client.call_tool("slow_first", {"marker": f"{index}", "first_ms": 10})
            spans.clear()
            answer = await client.call_tool("slow_first", {"marker": "99", "first_ms": 20_000})
    assert answer.result["attempt"] == "hedge"
    execute = _by_name(spans.get_finished_spans())["execute slow_first"]
    assert execute.attributes is not None
    assert execute.attributes["conclave.hedge.decision"] == "hedge"
    assert execute.attributes["conclave.hedge.started"] is True
    assert execute.attributes["conclave.hedge.winner"] == "hedge"
    assert int(execute.attributes["conclave.hedge.after_ms"]) > 0  # type: ignore[arg-type]

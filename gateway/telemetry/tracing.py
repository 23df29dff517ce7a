"""The gateway's OpenTelemetry traces: off unless the standard `OTEL_*` variables ask for them.

`TRACING.on` is the one boolean every instrumented place reads first: while it is False no
span is made and no OpenTelemetry code runs, so tracing off costs one attribute read per
instrumented step. `tracing_from_environment` (entered by the gateway's lifespan) turns it on
when `OTEL_TRACES_EXPORTER` names an exporter (`otlp`: OTLP/HTTP protobuf, whose endpoint,
headers and timeout the SDK reads from `OTEL_EXPORTER_OTLP_*`; `console`) or an OTLP endpoint
is set, unless `OTEL_SDK_DISABLED` is true. `start_tracing(provider)` turns it on with an SDK
provider of one's own (tests pass one with an in-memory exporter).

Cheap by construction (issue 17: on costs <= 10% calls/s, off <= 1%). Whether a request is
traced is decided once, as it arrives: by its caller's W3C `traceparent` flag when it sent
one, else by the provider's sampler; a request left out makes no span at all. A traced
request's spans are recorded as small `SpanRecord`s (`gateway.telemetry.span_records`), with
the current one in a context variable (no OpenTelemetry context attach, no SDK span), and
handed to the provider's span processors as SDK `ReadableSpan`s in one go when the request's
span ends; the processors (BatchSpanProcessor, an exporter) see what SDK spans would have
given them.

The gateway keeps its provider to itself rather than installing it as OpenTelemetry's global
one: a process may hold several gateways (tests, the bench) and an agent's own provider.
Spans carry identities, tool names, SERF codes and budgets; never a token or a secret.
"""

from __future__ import annotations

import os
import random
import re
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager, contextmanager
from typing import Any

from opentelemetry.context import Context
from opentelemetry.trace import (
    SpanContext,
    SpanKind,
    Status,
    StatusCode,
    TraceFlags,
    TracerProvider,
    TraceState,
)
from starlette.types import ASGIApp as Asgi
from starlette.types import Message, Receive, Scope, Send

from gateway.telemetry.span_records import (
    CURRENT_SPAN,
    NOT_RECORDED,
    AttributeValue,
    RequestTrace,
    SpanRecord,
    SpanSink,
)
from protocol import SerfError

_EXPORTERS = ("otlp", "console")
_DEFAULT_SERVICE = "conclave-gateway"
_SCOPE = "conclave.gateway"  # the instrumentation scope of every span
_TRACEPARENT = re.compile(r"^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$")
_SAMPLED = TraceFlags(TraceFlags.SAMPLED)
_NO_PARENT = Context()  # the sampler's parent for a request that arrives without a trace
_LOW_64 = (1 << 64) - 1  # the part of a trace id the ratio samplers compare
_EVERY_TRACE = 1 << 64  # a bound every trace id is under

Lifespan = Callable[[Any], AbstractAsyncContextManager[None]]


def _new_trace_bound(sampler: Any) -> int | None:
    """The bound under which `sampler` samples a trace begun without a parent, by the low 64
    bits of its id, when it decides by the id alone: the SDK's default
    (`parentbased_always_on`, everything), `always_off` (nothing) and the ratio samplers
    (`traceidratio`, `parentbased_traceidratio`: what the SDK's `TraceIdRatioBased`
    compares). None for another sampler, which is asked (~2-4 us a request, sampled or not)."""
    from opentelemetry.sdk.trace.sampling import (
        ALWAYS_OFF,
        ALWAYS_ON,
        ParentBased,
        TraceIdRatioBased,
    )

    root = sampler._root if type(sampler) is ParentBased else sampler  # for a trace's root
    if root is ALWAYS_ON:
        return _EVERY_TRACE
    if root is ALWAYS_OFF:
        return 0
    if type(root) is TraceIdRatioBased:
        return int(root.bound)
    return None


class _ProcessorSink(SpanSink):
    """An SDK provider's span processors, handed SDK `ReadableSpan`s (tests, `console`)."""

    def __init__(self, provider: Any) -> None:
        from opentelemetry.sdk.util.instrumentation import InstrumentationScope

        tracer = provider.get_tracer(_SCOPE)
        self.sampler = tracer.sampler
        self.new_trace_bound = _new_trace_bound(self.sampler)
        self.processor = tracer.span_processor
        self.resource = tracer.resource
        self.scope = InstrumentationScope(_SCOPE)

    def export(self, request: RequestTrace, spans: list[SpanRecord]) -> None:
        from opentelemetry.sdk.trace import ReadableSpan

        trace_id, state, remote = request.trace_id, request.trace_state, request.remote_parent
        for span in spans:
            if span.parent_id == 0:
                parent = None
            elif remote is not None and span.parent_id == remote.span_id:
                parent = remote
            else:
                parent = SpanContext(trace_id, span.parent_id, False, _SAMPLED, state)
            readable = ReadableSpan(
                span.name,
                context=SpanContext(trace_id, span.span_id, False, _SAMPLED, state),
                parent=parent,
                resource=self.resource,
                attributes=span.attributes,
                kind=span.kind,
                status=span.status,
                start_time=span.start_ns,
                end_time=span.end_ns,
                instrumentation_scope=self.scope,
            )
            self.processor.on_end(readable)


class _WireSink(SpanSink):
    """The OTLP/HTTP exporter of `gateway.telemetry.otlp_wire`: spans queued as recorded."""

    def __init__(self, sampler: Any, wire: Any) -> None:
        self.sampler = sampler
        self.new_trace_bound = _new_trace_bound(sampler)
        self.add = wire.add

    def export(self, request: RequestTrace, spans: list[SpanRecord]) -> None:
        self.add(request, spans)


class Tracing:
    """Whether the gateway traces, and where its spans go while it does."""

    def __init__(self) -> None:
        self.on = False
        self._sink: SpanSink | None = None

    def span(
        self,
        name: str,
        attributes: Mapping[str, AttributeValue] | None = None,
        kind: SpanKind = SpanKind.INTERNAL,
    ) -> SpanRecord:
        """A child of the current span, current itself while the block runs. Outside a
        traced request (the sampler left it out, or work outside a request) nothing is made:
        a request left out costs a context variable read per instrumented step."""
        parent = CURRENT_SPAN.get()
        if parent is None:
            return NOT_RECORDED
        return SpanRecord(parent.request, name, parent.span_id, attributes, kind)

    def timed_span(
        self, name: str, start_ns: int, end_ns: int, parent: SpanRecord | None = None
    ) -> SpanRecord:
        """A span of work timed elsewhere (a sandbox's start, stage by stage), ended at once:
        a child of `parent`, else of the current span; nothing outside a traced request."""
        parent = parent or CURRENT_SPAN.get()
        if parent is None or parent is NOT_RECORDED:
            return NOT_RECORDED
        span = SpanRecord(parent.request, name, parent.span_id, None, SpanKind.INTERNAL)
        span.start_ns, span.end_ns = start_ns, end_ns
        parent.request.ended(span)
        return span

    def request_span(
        self, method: str, path: str, traceparent: str | None, tracestate: str | None
    ) -> SpanRecord:
        """The span ("<method> <path>") of a request arriving with these W3C headers, if it is
        traced: decided here, once, by the caller's sampled flag when it sent a valid
        `traceparent`, else by the provider's sampler (`OTEL_TRACES_SAMPLER`) for a new trace.
        A request left out costs a random id and a comparison (the standard samplers)."""
        sink = self._sink
        if sink is None:
            return NOT_RECORDED
        match = _TRACEPARENT.match(traceparent) if traceparent else None
        remote = None
        if match is not None and (trace_id := int(match.group(1), 16)) and int(match.group(2), 16):
            if not int(match.group(3), 16) & 1:
                return NOT_RECORDED  # the caller does not sample this trace
            state = TraceState.from_header([tracestate]) if tracestate else None
            remote = SpanContext(trace_id, int(match.group(2), 16), True, _SAMPLED, state)
        else:
            trace_id, state = random.getrandbits(128) or 1, None
            bound = sink.new_trace_bound
            if bound is None:
                name = f"{method} {path}"
                decision = sink.sampler.should_sample(_NO_PARENT, trace_id, name, SpanKind.SERVER)
                if not decision.decision.is_sampled():
                    return NOT_RECORDED
            elif trace_id & _LOW_64 >= bound:
                return NOT_RECORDED
        request = RequestTrace(sink, trace_id, remote, state)
        parent_id = 0 if remote is None else remote.span_id
        attributes = {"http.request.method": method, "url.path": path}
        return SpanRecord(request, f"{method} {path}", parent_id, attributes, SpanKind.SERVER)


TRACING = Tracing()


def recording_span() -> SpanRecord | None:
    """The current span of a traced request, or None (not traced, or outside a request)."""
    return CURRENT_SPAN.get()


def start_tracing(provider: TracerProvider) -> None:
    """Trace into `provider`, the SDK's `TracerProvider` (its sampler, resource and span
    processors, say a BatchSpanProcessor with an exporter), from now on."""
    TRACING._sink = _ProcessorSink(provider)
    TRACING.on = True


def stop_tracing() -> None:
    """Stop tracing; spans already ended are flushed by whoever owns the provider."""
    TRACING.on = False
    TRACING._sink = None


def exporter_from_environment(env: Mapping[str, str] | None = None) -> str | None:
    """The exporter the `OTEL_*` variables ask for ("otlp", "console"), or None: tracing off."""
    env = os.environ if env is None else env
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return None
    named = env.get("OTEL_TRACES_EXPORTER", "").strip().lower()
    if named == "none":
        return None
    if named:
        if named not in _EXPORTERS:
            raise ValueError(
                f"OTEL_TRACES_EXPORTER={named!r} is not one the gateway ships: use one of"
                f" {', '.join(_EXPORTERS)}, or 'none'"
            )
        return named
    endpoints = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
    return "otlp" if any(env.get(name) for name in endpoints) else None


@contextmanager
def tracing_from_environment() -> Iterator[bool]:
    """Trace while the block runs if the `OTEL_*` variables configure an exporter; on the way
    out, flush and shut down what was started. Yields whether this block turned tracing on
    (not when off, nor when a provider was started already, as a test does)."""
    exporter = None if TRACING.on else exporter_from_environment()
    if exporter is None:
        yield False
        return
    sink, shutdown = _sink(exporter)
    TRACING._sink, TRACING.on = sink, True
    try:
        yield True
    finally:
        stop_tracing()
        shutdown()  # exports what is batched, then ends the exporter's thread


def traced_lifespan(lifespan: Lifespan) -> Lifespan:
    """`lifespan`, run inside `tracing_from_environment`: the gateway traces while it runs."""

    @asynccontextmanager
    async def traced(app: Any) -> AsyncIterator[None]:
        with tracing_from_environment():
            async with lifespan(app):
                yield

    return traced


def _sink(exporter: str) -> tuple[SpanSink, Callable[[], None]]:
    """The sink `exporter` names, with the SDK's sampler (`OTEL_TRACES_SAMPLER`) and resource
    (`OTEL_SERVICE_NAME`, `OTEL_RESOURCE_ATTRIBUTES`), and what shuts it down."""
    # Imported here: a gateway that does not trace never loads the SDK.
    from opentelemetry.sdk.resources import SERVICE_NAME, Resource
    from opentelemetry.sdk.trace import TracerProvider as SdkTracerProvider

    service = {SERVICE_NAME: os.environ.get("OTEL_SERVICE_NAME") or _DEFAULT_SERVICE}
    provider = SdkTracerProvider(resource=Resource.create(service))
    if exporter == "console":
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter

        provider.add_span_processor(BatchSpanProcessor(ConsoleSpanExporter()))
        return _ProcessorSink(provider), provider.shutdown
    from gateway.telemetry.otlp_wire import WireOtlpExport

    wire = WireOtlpExport(provider.resource, _SCOPE)
    return _WireSink(provider.sampler, wire), wire.shutdown


async def serve_traced(serve: Asgi, scope: Scope, receive: Receive, send: Send) -> None:
    """`serve` the HTTP request inside its server span, which continues the caller's W3C
    `traceparent` when it sent one and records the response's status; a request the
    sampling leaves out is served as is."""
    traceparent = tracestate = None
    for name, value in scope["headers"]:
        if name == b"traceparent":
            traceparent = value.decode("latin-1")
        elif name == b"tracestate":
            tracestate = value.decode("latin-1")
    span = TRACING.request_span(scope["method"], scope["path"], traceparent, tracestate)
    if span is NOT_RECORDED:
        await serve(scope, receive, send)
        return

    async def send_recorded(message: Message) -> None:
        if message["type"] == "http.response.start":
            status = int(message["status"])
            span.set_attribute("http.response.status_code", status)
            if status >= 500:
                span.status = Status(StatusCode.ERROR)
        await send(message)

    with span:
        await serve(scope, receive, send_recorded)


def current_trace() -> tuple[str, str] | None:
    """(trace id, W3C `traceparent`) of the current span, to hand on to whatever it calls;
    None outside a traced request."""
    span = CURRENT_SPAN.get()
    if span is None:
        return None
    return span.request.trace_hex, span.traceparent


def inject(headers: dict[str, str]) -> None:
    """Add the current span's W3C `traceparent` (and the caller's `tracestate`) to `headers`,
    for an upstream request; nothing outside a traced request."""
    span = CURRENT_SPAN.get()
    if span is None:
        return
    headers["traceparent"] = span.traceparent
    state = span.request.trace_state
    if state:
        headers["tracestate"] = state.to_header()


def mark_raised(span: SpanRecord, exc: BaseException) -> None:
    """Status ERROR naming the exception's type (not its message, which may quote input)."""
    span.set_status(Status(StatusCode.ERROR, type(exc).__name__))


def mark_failed(span: SpanRecord, error: SerfError) -> None:
    """Status ERROR with the SERF code (the message may quote a caller's input: left out)."""
    span.set_attribute("conclave.error.code", error.code.value)
    span.set_status(Status(StatusCode.ERROR, error.code.value))


__all__ = [
    "NOT_RECORDED",
    "TRACING",
    "RequestTrace",
    "SpanKind",
    "SpanRecord",
    "Tracing",
    "current_trace",
    "exporter_from_environment",
    "inject",
    "mark_failed",
    "mark_raised",
    "recording_span",
    "serve_traced",
    "start_tracing",
    "stop_tracing",
    "traced_lifespan",
    "tracing_from_environment",
]

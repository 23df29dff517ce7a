"""The gateway's OpenTelemetry traces: off unless the standard `OTEL_*` variables ask for them.

`TRACING.on` is the one boolean every instrumented place reads first: while it is False no
span object is made and no OpenTelemetry code runs, so tracing off costs one attribute read
per instrumented step. `tracing_from_environment` (entered by the gateway's lifespan) turns
it on when `OTEL_TRACES_EXPORTER` names an exporter (`otlp`: OTLP/HTTP protobuf, whose
endpoint, headers and timeout the SDK reads from `OTEL_EXPORTER_OTLP_*`; `console`) or an
OTLP endpoint is set, unless `OTEL_SDK_DISABLED` is true. `start_tracing(provider)` turns it
on with a provider of one's own (tests pass one with an in-memory exporter).

The gateway keeps its provider to itself rather than installing it as OpenTelemetry's global
one: a process may hold several gateways (tests, the bench) and an agent's own provider.
Spans carry identities, tool names, SERF codes and budgets; never a token or a secret.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from contextlib import (
    AbstractAsyncContextManager,
    AbstractContextManager,
    asynccontextmanager,
    contextmanager,
    nullcontext,
)
from typing import Any

from opentelemetry import trace
from opentelemetry.propagate import extract, inject
from opentelemetry.trace import Span, SpanKind, Status, StatusCode, Tracer
from starlette.types import ASGIApp as Asgi
from starlette.types import Message, Receive, Scope, Send

from protocol import SerfError

_EXPORTERS = ("otlp", "console")
_DEFAULT_SERVICE = "conclave-gateway"

AttributeValue = str | bool | int | float
Lifespan = Callable[[Any], AbstractAsyncContextManager[None]]


class Tracing:
    """Whether the gateway traces, and the tracer it traces with while it does."""

    def __init__(self) -> None:
        self.on = False
        self.tracer: Tracer = trace.NoOpTracer()
        self._provider: Any = None

    def span(
        self,
        name: str,
        attributes: Mapping[str, AttributeValue] | None = None,
        kind: SpanKind = SpanKind.INTERNAL,
    ) -> AbstractContextManager[Span]:
        """A child of the current span, made current while the block runs (only call when on).

        Under a span that is not recording (the sampler left this request out) or none (work
        outside a request), nothing is made: a request left out costs a context lookup per
        instrumented step, not a span. An exception leaves no trace of its own in the span (its
        message may quote a caller's input): the instrumented code sets the status, with
        `mark_failed` or `mark_raised`."""
        if not trace.get_current_span().is_recording():
            return _NOT_RECORDED
        return self.tracer.start_as_current_span(
            name,
            kind=kind,
            attributes=attributes,
            record_exception=False,
            set_status_on_exception=False,
        )


TRACING = Tracing()
_NOT_RECORDED = nullcontext(trace.INVALID_SPAN)  # what `span` gives outside a recorded request


def start_tracing(provider: trace.TracerProvider) -> None:
    """Trace with `provider` (say, the SDK's `TracerProvider` with an exporter) from now on."""
    TRACING.tracer = provider.get_tracer("conclave.gateway")
    TRACING._provider = provider
    TRACING.on = True


def stop_tracing() -> None:
    """Stop tracing; spans already ended are flushed by whoever owns the provider."""
    TRACING.on = False
    TRACING.tracer = trace.NoOpTracer()
    TRACING._provider = None


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
    provider = _provider(exporter)
    start_tracing(provider)
    try:
        yield True
    finally:
        stop_tracing()
        provider.shutdown()  # exports what is batched, then ends the exporter's thread


def traced_lifespan(lifespan: Lifespan) -> Lifespan:
    """`lifespan`, run inside `tracing_from_environment`: the gateway traces while it runs."""

    @asynccontextmanager
    async def traced(app: Any) -> AsyncIterator[None]:
        with tracing_from_environment():
            async with lifespan(app):
                yield

    return traced


def _provider(exporter: str) -> Any:
    # Imported here: a gateway that does not trace never loads the SDK.
    from opentelemetry.sdk.resources import SERVICE_NAME, Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import (
        BatchSpanProcessor,
        ConsoleSpanExporter,
        SpanExporter,
    )

    service = {SERVICE_NAME: os.environ.get("OTEL_SERVICE_NAME") or _DEFAULT_SERVICE}
    provider = TracerProvider(resource=Resource.create(service))
    if exporter == "console":
        chosen: SpanExporter = ConsoleSpanExporter()
    else:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        chosen = OTLPSpanExporter()
    provider.add_span_processor(BatchSpanProcessor(chosen))
    return provider


async def serve_traced(serve: Asgi, scope: Scope, receive: Receive, send: Send) -> None:
    """`serve` the HTTP request inside its server span, which continues the caller's W3C
    `traceparent` when it sent one and records the response's status."""
    carrier = {
        name.decode("latin-1"): value.decode("latin-1")
        for name, value in scope["headers"]
        if name in (b"traceparent", b"tracestate")
    }
    method, path = scope["method"], scope["path"]
    with TRACING.tracer.start_as_current_span(
        f"{method} {path}",
        context=extract(carrier),
        kind=SpanKind.SERVER,
        attributes={"http.request.method": method, "url.path": path},
    ) as span:

        async def send_recorded(message: Message) -> None:
            if message["type"] == "http.response.start":
                status = int(message["status"])
                span.set_attribute("http.response.status_code", status)
                if status >= 500:
                    span.set_status(Status(StatusCode.ERROR))
            await send(message)

        await serve(scope, receive, send_recorded)


def current_trace() -> tuple[str, str] | None:
    """(trace id, W3C `traceparent`) of the current span, to hand on to whatever it calls;
    None outside a valid span. Formatted here: a tool's context is W3C whatever propagators
    the process configured for its HTTP calls."""
    span_context = trace.get_current_span().get_span_context()
    if not span_context.is_valid:
        return None
    trace_id = f"{span_context.trace_id:032x}"
    flags = f"{span_context.trace_flags:02x}"
    return trace_id, f"00-{trace_id}-{span_context.span_id:016x}-{flags}"


def mark_raised(span: Span, exc: BaseException) -> None:
    """Status ERROR naming the exception's type (not its message, which may quote input)."""
    span.set_status(Status(StatusCode.ERROR, type(exc).__name__))


def mark_failed(span: Span, error: SerfError) -> None:
    """Status ERROR with the SERF code (the message may quote a caller's input: left out)."""
    span.set_attribute("conclave.error.code", error.code.value)
    span.set_status(Status(StatusCode.ERROR, error.code.value))


__all__ = [
    "TRACING",
    "SpanKind",
    "Tracing",
    "current_trace",
    "exporter_from_environment",
    "inject",
    "mark_failed",
    "mark_raised",
    "serve_traced",
    "start_tracing",
    "stop_tracing",
    "traced_lifespan",
    "tracing_from_environment",
]

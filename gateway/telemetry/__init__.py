"""What the gateway tells operators: traces (OpenTelemetry, with its own OTLP writer),
Prometheus metrics, the audit streams and JSON logs."""

from gateway.telemetry.audit import (
    ANONYMOUS_STREAM,
    FEED_STREAM,
    AuditLog,
    AuditRecord,
    AuditWriter,
    Outcome,
)
from gateway.telemetry.call_series import SERIES_MINUTES, CallSeries, TenantMinute, ToolMinute
from gateway.telemetry.json_logs import install_json_logging
from gateway.telemetry.metrics import OTHER, GatewayMetrics
from gateway.telemetry.otlp_wire import encode_requests
from gateway.telemetry.tracing import (
    NOT_RECORDED,
    TRACING,
    SpanKind,
    SpanRecord,
    current_trace,
    inject,
    mark_failed,
    mark_raised,
    recording_span,
    serve_traced,
    start_tracing,
    stop_tracing,
    traced_lifespan,
)

__all__ = [
    "ANONYMOUS_STREAM",
    "FEED_STREAM",
    "NOT_RECORDED",
    "OTHER",
    "SERIES_MINUTES",
    "TRACING",
    "AuditLog",
    "AuditRecord",
    "AuditWriter",
    "CallSeries",
    "GatewayMetrics",
    "Outcome",
    "SpanKind",
    "SpanRecord",
    "TenantMinute",
    "ToolMinute",
    "current_trace",
    "encode_requests",
    "inject",
    "install_json_logging",
    "mark_failed",
    "mark_raised",
    "recording_span",
    "serve_traced",
    "start_tracing",
    "stop_tracing",
    "traced_lifespan",
]

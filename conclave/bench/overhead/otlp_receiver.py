"""A local OTLP/HTTP trace receiver: what a collector would get from a tracing gateway.

`OtlpReceiver` serves `POST /v1/traces` on 127.0.0.1 in a thread, decodes each
`ExportTraceServiceRequest` (protobuf, optionally gzip) when asked for its spans, each with
the `service.name` of the resource that sent it. Used by the tracing tests and
`conclave bench tracing`; not a collector to run in production.
"""

from __future__ import annotations

import gzip
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)


@dataclass(frozen=True)
class ReceivedSpan:
    service: str
    name: str
    trace_id: str
    span_id: str
    parent_span_id: str
    attributes: dict[str, Any] = field(default_factory=dict)


class OtlpReceiver:
    """An OTLP/HTTP endpoint on a free loopback port; `endpoint` is its base URL."""

    def __init__(self) -> None:
        self.requests = 0
        self._bodies: list[bytes] = []
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def endpoint(self) -> str:
        """What `OTEL_EXPORTER_OTLP_ENDPOINT` should be set to (the exporter adds /v1/traces)."""
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def start(self) -> OtlpReceiver:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    @property
    def spans(self) -> list[ReceivedSpan]:
        """Every span received so far, decoded now (not on arrival: a receiver in a bench's
        process must not take the interpreter from the client it shares it with)."""
        with self._lock:
            bodies = list(self._bodies)
        return [span for body in bodies for span in _decoded(body)]

    def wait_for(self, name: str, timeout_s: float = 10.0) -> list[ReceivedSpan]:
        """The spans received once one named `name` arrived; [] if none did within `timeout_s`."""
        ends = time.monotonic() + timeout_s
        while time.monotonic() < ends:
            spans = self.spans
            if any(span.name == name for span in spans):
                return spans
            time.sleep(0.02)
        return []

    def _receive(self, body: bytes) -> None:
        with self._lock:
            self.requests += 1
            self._bodies.append(body)

    def __enter__(self) -> OtlpReceiver:
        return self.start()

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


def _decoded(body: bytes) -> list[ReceivedSpan]:
    request = ExportTraceServiceRequest.FromString(body)
    received = []
    for resource_spans in request.resource_spans:
        service = next(
            (a.value.string_value for a in resource_spans.resource.attributes
             if a.key == "service.name"),
            "",
        )  # fmt: skip
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                received.append(
                    ReceivedSpan(
                        service,
                        span.name,
                        span.trace_id.hex(),
                        span.span_id.hex(),
                        span.parent_span_id.hex(),
                        {a.key: _value(a.value) for a in span.attributes},
                    )
                )
    return received


def _value(value: Any) -> Any:
    kind = value.WhichOneof("value")
    return getattr(value, kind) if kind else None


def _handler(receiver: OtlpReceiver) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        # Keep-alive, as a collector is: a batch does not pay for a new connection.
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("content-length") or 0))
            if self.headers.get("content-encoding") == "gzip":
                body = gzip.decompress(body)
            if self.path != "/v1/traces":
                self.send_error(404)
                return
            receiver._receive(body)
            answer = ExportTraceServiceResponse().SerializeToString()
            self.send_response(200)
            self.send_header("content-type", "application/x-protobuf")
            self.send_header("content-length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, format: str, *args: Any) -> None:
            pass  # quiet: the tests and the bench print what matters

    return Handler

"""OTLP/HTTP export of the gateway's spans, written straight to protobuf's wire format.

The SDK's path costs a traced request more than its own work: an SDK `ReadableSpan` per span,
the BatchSpanProcessor's queue per span, and an OTLP encoder that builds a protobuf object per
span, attribute and value (~12 us a span, in the export thread, holding the GIL against the
event loop on 2 cores). `WireOtlpExport` writes a finished request's spans as protobuf when
the request ends (`encode_spans`, ~2 us a span) and queues the bytes (one queue entry a
request); its thread frames a batch as one `ExportTraceServiceRequest` (`encode_requests`
writes one from records) and sends it with the SDK's own OTLP/HTTP client: endpoint,
headers, timeout, compression and retries from `OTEL_EXPORTER_OTLP_*`, batching from
`OTEL_BSP_SCHEDULE_DELAY`, `OTEL_BSP_MAX_EXPORT_BATCH_SIZE` and `OTEL_BSP_MAX_QUEUE_SIZE`
(in spans), as the BatchSpanProcessor reads them. Spans carry no events or links.
"""

from __future__ import annotations

import logging
import os
import struct
import threading
from collections import deque
from collections.abc import Mapping, Sequence
from typing import Any

from opentelemetry.sdk.resources import Resource
from opentelemetry.trace import SpanKind, Status, StatusCode

from gateway.telemetry.span_records import UNSET_STATUS, RequestTrace, SpanRecord

log = logging.getLogger("conclave.gateway.tracing")

_HAS_IS_REMOTE, _IS_REMOTE = 0x100, 0x200  # OTLP SpanFlags: the parent is (not) remote
_DOUBLE = struct.Struct("<d")
_FIXED32 = struct.Struct("<I")
_NO_PARENT, _LOCAL_PARENT, _REMOTE_PARENT = 0, 1, 2
# A span's SpanFlags (field 16, fixed32), by its parent: none, a local one, a remote one.
_FLAGS = (
    b"\x85\x01" + _FIXED32.pack(_HAS_IS_REMOTE),
    b"\x85\x01" + _FIXED32.pack(_HAS_IS_REMOTE),
    b"\x85\x01" + _FIXED32.pack(_HAS_IS_REMOTE | _IS_REMOTE),
)
_KINDS = [b"\x30" + bytes((kind.value + 1,)) for kind in SpanKind]  # OTLP: 0 unspecified
_TIMES = struct.Struct("<BQBQ")  # start and end: fields 7 and 8, fixed64
_ID = struct.Struct(">HQ")  # the span id field's tag and length (0x1208), its 8 bytes
_IDS = struct.Struct(">HQHQ")  # the span id's field, then the parent id's (0x2208)
_EMPTY_STATUS = b"\x7a\x00"  # status UNSET, written as the SDK's encoder writes it
_ONE_BYTE = tuple(bytes((n,)) for n in range(0x80))
_MAX_ENCODED = 4096
# Encoded once: the (key, value) attributes that recur request after request (tool, tenant,
# agent and script names, granted times); bounded, cleared when full. Only pairs whose value
# is exactly a str or an int are kept and looked up ((k, True) == (k, 1) in a dict).
_ENCODED: dict[tuple[str, Any], bytes] = {}
_DOUBLE_HEADS: dict[str, bytes] = {}  # a float attribute's KeyValue but the value, by key
# A span's parts that do not change from one request to the next, by name, kind and parent
# (`_Shape`): written once.
_SHAPES: dict[tuple[str, int, int], _Shape] = {}
# The SDK's variables naming a credential provider, whose requests session it then sends with.
_CREDENTIAL_PROVIDERS = (
    "OTEL_PYTHON_EXPORTER_OTLP_HTTP_CREDENTIAL_PROVIDER",
    "OTEL_PYTHON_EXPORTER_OTLP_HTTP_TRACES_CREDENTIAL_PROVIDER",
)


def _varint(value: int) -> bytes:
    if value < 0x80:
        return _ONE_BYTE[value]
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _field(number: int, payload: bytes) -> bytes:
    """A length-delimited field (string, bytes, message) of number < 16."""
    size = len(payload)
    return (
        _ONE_BYTE[number << 3 | 2] + (_ONE_BYTE[size] if size < 0x80 else _varint(size)) + payload
    )


def _any_value(value: Any) -> bytes:
    if isinstance(value, str):
        return _field(1, value.encode())
    if isinstance(value, bool):
        return b"\x10" + (b"\x01" if value else b"\x00")
    if isinstance(value, int):
        return b"\x18" + _varint(value & 0xFFFFFFFFFFFFFFFF)  # int64: two's complement
    if isinstance(value, float):
        return b"\x21" + _DOUBLE.pack(value)
    if isinstance(value, bytes):
        return _field(7, value)
    if isinstance(value, Sequence):
        return _field(5, b"".join(_field(1, _any_value(item)) for item in value))
    return _field(1, str(value).encode())


def _attributes(number: int, attributes: Mapping[str, Any]) -> bytes:
    """`attributes` as repeated KeyValue fields `number` (9 in a Span, 1 in a Resource)."""
    out = []
    for pair in attributes.items():
        kind = type(pair[1])
        if kind is str or kind is int:
            encoded = _ENCODED.get(pair)
            if encoded is None:
                encoded = _kept(number, pair)
        elif kind is float and number == 9:  # a measure: seldom the same twice
            key = pair[0]
            encoded = (_DOUBLE_HEADS.get(key) or _double_head(key)) + _DOUBLE.pack(pair[1])
        else:
            encoded = _field(number, _field(1, pair[0].encode()) + _field(2, _any_value(pair[1])))
        out.append(encoded)
    return b"".join(out)


def _kept(number: int, pair: tuple[str, Any]) -> bytes:
    if len(_ENCODED) >= _MAX_ENCODED:
        _ENCODED.clear()
    key, value = pair
    key_value = _field(1, key.encode()) + _field(2, _any_value(value))
    encoded = _ENCODED[pair] = _field(number, key_value)
    return encoded


def _double_head(key: str) -> bytes:
    """A span attribute's KeyValue up to its double's 8 bytes (which `_DOUBLE` packs)."""
    if len(_DOUBLE_HEADS) >= _MAX_ENCODED:
        _DOUBLE_HEADS.clear()
    value_field = b"\x12\x09\x21"  # the value: an AnyValue of 9 bytes, a double (field 4)
    key_value = _field(1, key.encode()) + value_field
    head = _DOUBLE_HEADS[key] = _field(9, key_value + bytes(8))[: -_DOUBLE.size]
    return head


def _status(status: Status) -> bytes:
    if status.status_code is StatusCode.UNSET:
        return _EMPTY_STATUS
    code, description = status.status_code.value, status.description
    message = _field(2, description.encode()) if description else b""
    return _field(15, message + (b"\x18" + _varint(code) if code else b""))


class _Shape:
    """A span's fields that its name, kind and parent fix: the name, kind and flags
    (`fixed`); the size of every field but the trace state, attributes and status
    (`size`); and, for a span with none of those three, its whole head (`head`: tag,
    length and `fixed`), after which only ids, trace id and times are written."""

    __slots__ = ("fixed", "head", "size")

    def __init__(self, name: str, kind: int, parent: int) -> None:
        self.fixed = _field(5, name.encode()) + _KINDS[kind] + _FLAGS[parent]
        ids = _IDS.size if parent != _NO_PARENT else _ID.size
        self.size = len(self.fixed) + 18 + ids + _TIMES.size  # 18: the trace id's field
        plain = self.size + len(_EMPTY_STATUS)
        self.head = b"\x12" + _varint(plain) + self.fixed + _EMPTY_STATUS


def _shape(name: str, kind: int, parent: int) -> _Shape:
    if len(_SHAPES) >= _MAX_ENCODED:
        _SHAPES.clear()
    shape = _SHAPES[name, kind, parent] = _Shape(name, kind, parent)
    return shape


def encode_spans(request: RequestTrace, spans: Sequence[SpanRecord]) -> bytes:
    """Each span of `request` as a ScopeSpans' `spans` field (repeated: these bytes joined
    with another request's are the fields of both). The fields of a span come in another
    order than the SDK's encoder writes them: protobuf reads them the same in any order."""
    state = request.trace_state
    trace_state = _field(3, state.to_header().encode()) if state else b""
    trace = b"\x0a\x10" + request.trace_id.to_bytes(16, "big")
    remote_id = request.root_parent_id
    out: list[bytes] = []
    for span in spans:
        parent_id = span.parent_id
        if parent_id == 0:
            parent = _NO_PARENT
            ids = _ID.pack(0x1208, span.span_id)
        else:
            parent = _REMOTE_PARENT if parent_id == remote_id else _LOCAL_PARENT
            ids = _IDS.pack(0x1208, span.span_id, 0x2208, parent_id)
        name = span.name
        kind = span.kind._value_
        shape = _SHAPES.get((name, kind, parent)) or _shape(name, kind, parent)
        times = _TIMES.pack(0x39, span.start_ns, 0x41, span.end_ns)
        attributes = span.attributes
        status = span.status
        if not attributes and status is UNSET_STATUS and not trace_state:
            out += (shape.head, trace, ids, times)
            continue
        extra = _attributes(9, attributes) if attributes else b""
        extra += _EMPTY_STATUS if status is UNSET_STATUS else _status(status)
        size = shape.size + len(trace_state) + len(extra)
        out += (b"\x12", _varint(size), shape.fixed, trace, ids, times, trace_state, extra)
    return b"".join(out)


def encode_requests(
    resource: Resource, scope: str, finished: Sequence[tuple[RequestTrace, Sequence[SpanRecord]]]
) -> bytes:
    """The OTLP `ExportTraceServiceRequest` carrying the spans of `finished` requests, all
    of one resource and instrumentation scope."""
    return _ExportFrame(resource, scope).wrap([encode_spans(r, s) for r, s in finished])


class _ExportFrame:
    """An `ExportTraceServiceRequest` around spans already written (`encode_spans`): its one
    ResourceSpans and ScopeSpans, whose fixed parts are written once."""

    def __init__(self, resource: Resource, scope: str) -> None:
        self._resource = _field(1, _attributes(1, resource.attributes))
        self._scope = _field(1, _field(1, scope.encode()))
        schema = resource.schema_url
        self._schema = _field(3, schema.encode()) if schema else b""

    def wrap(self, spans: Sequence[bytes]) -> bytes:
        scope_spans = _field(2, self._scope + b"".join(spans))
        return _field(1, self._resource + scope_spans + self._schema)


class WireOtlpExport:
    """Batches finished requests' spans and sends them over OTLP/HTTP from its own thread."""

    def __init__(self, resource: Resource, scope: str) -> None:
        self._exporter = _span_exporter()
        self._frame = _ExportFrame(resource, scope)
        self._delay_s = _env_int("OTEL_BSP_SCHEDULE_DELAY", 5000) / 1000
        self._batch = _env_int("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", 512)
        self._max_queued = _env_int("OTEL_BSP_MAX_QUEUE_SIZE", 2048)
        self._queue: deque[tuple[bytes, int]] = deque()  # a request's spans, written; count
        # Spans queued and spans taken off the queue, each counted by one thread only (a count
        # both threads wrote would lose updates between them).
        self._added = self._taken = 0
        self._wake = threading.Event()
        self._stopping = False
        self._sending = threading.Lock()
        self._thread = threading.Thread(target=self._run, name="OtelWireExport", daemon=True)
        self._thread.start()

    def add(self, request: RequestTrace, spans: Sequence[SpanRecord]) -> None:
        """Write `spans` and queue them (a full queue drops them). Written here, on the event
        loop, not in the thread: the thread would hold the same interpreter lock for as long,
        and records queued until a batch leaves outlive the collector's young generations
        (the full collections they set off cost a traced request more than its writing)."""
        count = len(spans)
        queued = self._added - self._taken
        if queued + count > self._max_queued:
            log.warning("trace export queue full (%d spans): spans dropped", queued)
            return
        self._queue.append((encode_spans(request, spans), count))
        self._added += count
        if queued + count >= self._batch:
            self._wake.set()

    def _run(self) -> None:
        while not self._stopping:
            full = self._wake.wait(self._delay_s)
            self._wake.clear()
            # Woken by a full batch, the thread sends full batches only: what is left waits
            # for the next (soon, under the load that filled one) or the schedule's delay. A
            # request to the collector costs the same CPU whatever its size, in this process.
            self._send(full_only=full and not self._stopping)
        self._send()

    def _send(self, *, full_only: bool = False) -> None:
        with self._sending:
            while self._queue and (not full_only or self._added - self._taken >= self._batch):
                written, count = [], 0
                while self._queue and count < self._batch:
                    spans, spans_count = self._queue.popleft()
                    written.append(spans)
                    count += spans_count
                self._taken += count
                data = self._frame.wrap(written)
                # The SDK exporter's own HTTP client: its retries, compression and headers.
                result = self._exporter._client.export(data)
                if not result.success:
                    log.warning("trace export failed: %s", result.error or result.status_code)

    def force_flush(self) -> None:
        """Send what is queued now."""
        self._send()

    def shutdown(self) -> None:
        """Send what is queued, then end the thread and the exporter."""
        self._stopping = True
        self._wake.set()
        self._thread.join()
        self._exporter.shutdown()


def _span_exporter() -> Any:
    """The SDK's OTLP/HTTP span exporter (it reads `OTEL_EXPORTER_OTLP_*`), sending through the
    SDK's urllib3 transport rather than its requests one where requests would add nothing: no
    proxy and no netrc entry for the endpoint, no credential provider's session. requests reads
    the environment again for every request (proxies, netrc, CA bundle): a batch costs ~0.65 ms
    of CPU to send through it and ~0.3 ms through urllib3, in a thread that holds the
    interpreter lock against the event loop."""
    import requests
    from opentelemetry.exporter.http.transport._urllib3 import Urllib3HTTPTransport
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    exporter = OTLPSpanExporter()
    session = getattr(exporter._client._transport, "_session", None)
    providers = [os.environ.get(name) for name in _CREDENTIAL_PROVIDERS]
    if type(session) is not requests.Session or session.auth is not None or any(providers):
        return exporter
    endpoint = exporter._endpoint
    # What requests would take from the environment for this endpoint, read once.
    environment = session.merge_environment_settings(endpoint, {}, None, None, None)
    if environment["proxies"] or requests.utils.get_netrc_auth(endpoint):
        return exporter
    exporter.shutdown()  # type: ignore[no-untyped-call]
    verify = True if environment["verify"] is None else environment["verify"]
    transport = Urllib3HTTPTransport(verify=verify, cert=session.cert)
    return OTLPSpanExporter(_transport=transport)


def _env_int(name: str, default: int) -> int:
    value = os.environ.get(name, "").strip()
    return int(value) if value.isdigit() and int(value) > 0 else default


__all__ = ["WireOtlpExport", "encode_requests", "encode_spans"]

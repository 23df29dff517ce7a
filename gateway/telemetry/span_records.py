"""A traced request's spans as plain records: `SpanRecord`, its `RequestTrace`, the current one.

What `gateway.telemetry.tracing` makes while a request is traced and what its sinks (the SDK's
span processors, the OTLP writer of `gateway.telemetry.otlp_wire`) are handed when the
request's span ends: both read these records, neither imports the other's module for them.
`CURRENT_SPAN` (a context variable) holds the span entered last; `NOT_RECORDED` is what an
instrumented step gets outside a traced request.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextvars import ContextVar, Token
from random import getrandbits as _getrandbits
from time import time_ns as _time_ns
from typing import Any

from opentelemetry.trace import SpanContext, SpanKind, Status, StatusCode, TraceState

AttributeValue = str | bool | int | float
UNSET_STATUS = Status(StatusCode.UNSET)  # a span's status until it is set


class SpanRecord:
    """One span of a traced request, as plain fields: entered, it is the current span (a
    context variable) until it exits; its request hands it on when the request's span ends."""

    __slots__ = (
        "_token",
        "attributes",
        "end_ns",
        "kind",
        "name",
        "parent_id",
        "request",
        "span_id",
        "start_ns",
        "status",
    )

    def __init__(
        self,
        request: RequestTrace,
        name: str,
        parent_id: int,
        attributes: Mapping[str, AttributeValue] | None,
        kind: SpanKind,
    ) -> None:
        self.request = request
        self.name = name
        self.span_id = _getrandbits(64) or 1
        self.parent_id = parent_id
        # The caller's mapping as it is (a Redis script's are the same every call): never
        # changed in place, replaced by a copy when an attribute is set.
        self.attributes: Mapping[str, AttributeValue] | None = attributes
        self.kind = kind
        self.status = UNSET_STATUS
        self.start_ns = self.end_ns = 0
        self._token: Token[SpanRecord | None] | None = None

    def __enter__(self) -> SpanRecord:
        self.start_ns = _time_ns()
        self._token = CURRENT_SPAN.set(self)
        return self

    def __exit__(self, kind: object, exc: object, traceback: object) -> None:
        # An exception leaves no trace of its own (its message may quote a caller's input):
        # the instrumented code sets the status, with `mark_failed` or `mark_raised`.
        self.end_ns = _time_ns()
        if self._token is not None:
            CURRENT_SPAN.reset(self._token)
            self._token = None  # it holds the task's context: let both go with the request
        request = self.request
        finished = request.finished
        # `RequestTrace.ended`, written out here: one call less for each span.
        if finished is not None and self.parent_id != request.root_parent_id:
            finished.append(self)
        else:
            request.ended(self)

    def set_attribute(self, name: str, value: AttributeValue) -> None:
        self.attributes = {**(self.attributes or {}), name: value}

    def set_attributes(self, attributes: Mapping[str, AttributeValue]) -> None:
        self.attributes = {**(self.attributes or {}), **attributes}

    def set_status(self, status: Status) -> None:
        self.status = status

    @property
    def traceparent(self) -> str:
        """The W3C `traceparent` naming this span, for whatever it calls."""
        return f"00-{self.request.trace_hex}-{self.span_id:016x}-01"


class _Unrecorded(SpanRecord):
    """What `Tracing.span` gives outside a traced request: takes every call, keeps nothing."""

    def __init__(self) -> None:
        pass

    def __enter__(self) -> SpanRecord:
        return self

    def __exit__(self, kind: object, exc: object, traceback: object) -> None:
        return None

    def set_attribute(self, name: str, value: AttributeValue) -> None:
        return None

    def set_attributes(self, attributes: Mapping[str, AttributeValue]) -> None:
        return None

    def set_status(self, status: Status) -> None:
        return None


class RequestTrace:
    """The spans of one traced request, handed to the span processors as `ReadableSpan`s
    when its first span (the request's) ends; a span ending later is handed on alone."""

    __slots__ = (
        "_sink",
        "finished",
        "remote_parent",
        "root_parent_id",
        "trace_hex",
        "trace_id",
        "trace_state",
    )

    def __init__(
        self,
        sink: SpanSink,
        trace_id: int,
        remote_parent: SpanContext | None,
        trace_state: TraceState | None,
    ) -> None:
        self._sink = sink
        self.trace_id = trace_id
        self.trace_hex = f"{trace_id:032x}"
        self.remote_parent = remote_parent
        self.trace_state = trace_state
        # The parent of the request's own span: 0 for a new trace, the caller's span if not.
        self.root_parent_id = 0 if remote_parent is None else remote_parent.span_id
        # The spans ended so far, until the request's own span ends: then None.
        self.finished: list[SpanRecord] | None = []

    def ended(self, span: SpanRecord) -> None:
        finished = self.finished
        if finished is None:  # after the request's span: a straggler, sent on its own
            self._sink.export(self, [span])
        elif span.parent_id == self.root_parent_id:
            finished.append(span)
            self.finished = None
            self._sink.export(self, finished)
        else:
            finished.append(span)


class SpanSink:
    """Where a traced request's finished spans go, and the sampler of new traces."""

    sampler: Any
    # The bound the low 64 bits of a new trace's id must be under for it to be sampled, when
    # the sampler decides by the id alone; None: the sampler is asked.
    new_trace_bound: int | None = None

    def export(self, request: RequestTrace, spans: list[SpanRecord]) -> None:
        raise NotImplementedError


CURRENT_SPAN: ContextVar[SpanRecord | None] = ContextVar("conclave_current_span", default=None)
NOT_RECORDED: SpanRecord = _Unrecorded()

__all__ = [
    "CURRENT_SPAN",
    "NOT_RECORDED",
    "UNSET_STATUS",
    "AttributeValue",
    "RequestTrace",
    "SpanRecord",
    "SpanSink",
]

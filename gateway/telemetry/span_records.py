"""A traced request's spans as plain records: `SpanRecord`, its `RequestTrace`, the current one.

What `gateway.telemetry.tracing` makes while a request is traced and what its sinks (the SDK's
span processors, the OTLP writer of `gateway.telemetry.otlp_wire`) are handed when the
request's span ends: both read these records, neither imports the other's module for them.
`CURRENT_SPAN` (a context variable) holds the span entered last; `NOT_RECORDED` is what an
instrumented step gets outside a traced request.
"""

from __future__ import annotations

import random
import time
from collections.abc import Mapping
from contextvars import ContextVar, Token
from typing import Any

from opentelemetry.trace import SpanContext, SpanKind, Status, StatusCode, TraceState

AttributeValue = str | bool | int | float
_UNSET = Status(StatusCode.UNSET)


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
        self.span_id = random.getrandbits(64) or 1
        self.parent_id = parent_id
        self.attributes: dict[str, AttributeValue] = dict(attributes) if attributes else {}
        self.kind = kind
        self.status = _UNSET
        self.start_ns = self.end_ns = 0
        self._token: Token[SpanRecord | None] | None = None

    def __enter__(self) -> SpanRecord:
        self.start_ns = time.time_ns()
        self._token = CURRENT_SPAN.set(self)
        return self

    def __exit__(self, *exc: object) -> None:
        # An exception leaves no trace of its own (its message may quote a caller's input):
        # the instrumented code sets the status, with `mark_failed` or `mark_raised`.
        self.end_ns = time.time_ns()
        if self._token is not None:
            CURRENT_SPAN.reset(self._token)
            self._token = None  # it holds the task's context: let both go with the request
        self.request.ended(self)

    def set_attribute(self, name: str, value: AttributeValue) -> None:
        self.attributes[name] = value

    def set_attributes(self, attributes: Mapping[str, AttributeValue]) -> None:
        self.attributes.update(attributes)

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

    def __exit__(self, *exc: object) -> None:
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

    __slots__ = ("_finished", "_sink", "remote_parent", "trace_hex", "trace_id", "trace_state")

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
        self._finished: list[SpanRecord] | None = []

    def ended(self, span: SpanRecord) -> None:
        finished = self._finished
        if finished is None:  # after the request's span: a straggler, sent on its own
            self._sink.export(self, [span])
        elif span.parent_id == self._root_parent_id:
            finished.append(span)
            self._finished = None
            self._sink.export(self, finished)
        else:
            finished.append(span)

    @property
    def _root_parent_id(self) -> int:
        return 0 if self.remote_parent is None else self.remote_parent.span_id


class SpanSink:
    """Where a traced request's finished spans go, and the sampler of new traces."""

    sampler: Any

    def export(self, request: RequestTrace, spans: list[SpanRecord]) -> None:
        raise NotImplementedError


CURRENT_SPAN: ContextVar[SpanRecord | None] = ContextVar("conclave_current_span", default=None)
NOT_RECORDED: SpanRecord = _Unrecorded()

__all__ = [
    "CURRENT_SPAN",
    "NOT_RECORDED",
    "AttributeValue",
    "RequestTrace",
    "SpanRecord",
    "SpanSink",
]

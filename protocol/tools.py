"""Tools on the wire: their spec, a call's limits, its context, usage and result."""

from __future__ import annotations

from collections.abc import Callable
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, JsonValue, PrivateAttr

from protocol.call_events import LogEvent, LogLevel, ProgressEvent
from protocol.content import ToolAnnotations
from protocol.identity import NAME_PATTERN, Principal
from protocol.time_budget import Budget, BudgetGrant

# Asks for a failing tool's own traceback in the SERF `details.traceback`: honoured only with
# the gateway's admin key beside the caller's token (the tools' code is the operator's).
DEBUG_HEADER = "X-Conclave-Debug"
TRACEBACK_DETAIL = "traceback"


class ResourceIntent(BaseModel):
    """What a tool declares it may need; a call may ask for less, never more."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    memory_mb: int = Field(default=256, gt=0, le=65536)
    cpu_seconds: float = Field(default=10.0, gt=0, le=3600)
    timeout_ms: int = Field(default=30_000, gt=0, le=3_600_000)
    max_output_bytes: int = Field(default=1_048_576, gt=0)


class ResourceRequest(BaseModel):
    """Limits a caller asks for one call; each must fit inside the tool's intent."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    memory_mb: int | None = Field(default=None, gt=0)
    cpu_seconds: float | None = Field(default=None, gt=0)
    timeout_ms: int | None = Field(default=None, gt=0)


class ToolSpec(BaseModel):
    """A tool as the gateway serves it. `annotations` are the hints `tools/list` shows (from
    the tool's declared intent, or an upstream's own); `output_schema` the JSON Schema its
    `structuredContent` follows, if it has one; `icons` and `meta` an upstream's, kept."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(pattern=NAME_PATTERN)
    title: str | None = None
    description: str = ""
    input_schema: dict[str, Any]
    output_schema: dict[str, Any] | None = None
    intent: ResourceIntent = ResourceIntent()
    idempotent: bool = False
    annotations: ToolAnnotations | None = None
    icons: list[dict[str, Any]] | None = None
    meta: dict[str, Any] | None = None


class ToolContext(BaseModel):
    """Who and when, injected by the gateway into every call (MCP `_meta` on the wire)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    principal: Principal
    session_id: str
    trace_id: str
    traceparent: str
    deadline_ms: int | None = None
    # A hedged copy of a call already running (an idempotent tool's second attempt, started
    # by the gateway when the first ran long): the tool may use it to draw anew.
    hedge: bool = False
    # Where the call's events go (set where the tool runs: the runner, the in-process
    # executor); never on the wire. Without it, reporting is a no-op.
    _report: Callable[[ProgressEvent | LogEvent], None] | None = PrivateAttr(default=None)

    def reporting_to(self, report: Callable[[ProgressEvent | LogEvent], None]) -> ToolContext:
        """This context, its `report_progress` and `log` going to `report`."""
        context = self.model_copy()
        context._report = report
        return context

    def report_progress(
        self, progress: float, total: float | None = None, message: str | None = None
    ) -> None:
        """Tell the caller how far the call is (MCP `notifications/progress`)."""
        if self._report is not None:
            self._report(ProgressEvent(progress=progress, total=total, message=message))

    def log(self, level: str, data: JsonValue, logger: str | None = None) -> None:
        """Send the caller a log message (MCP `notifications/message`) at `level` (debug,
        info, notice, warning, error, critical, alert, emergency); the caller's
        `logging/setLevel` decides whether it is sent."""
        if self._report is not None:
            self._report(LogEvent(level=LogLevel(level), data=data, logger=logger))


class ExitReason(StrEnum):
    OK = "ok"
    ERROR = "error"
    TIMEOUT = "timeout"
    OOM = "oom"
    KILLED = "killed"
    CANCELLED = "cancelled"  # its caller cancelled it or went away; its processes were killed


class CallUsage(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    wall_ms: float = Field(ge=0)
    cpu_ms: float = Field(default=0.0, ge=0)
    peak_rss_kb: int = Field(default=0, ge=0)
    exit_reason: ExitReason = ExitReason.OK
    sandbox: str | None = Field(default=None, description="backend and sandbox id")


class ToolCallRequest(BaseModel):
    """Body of `POST /v1/tools/{name}/call`."""

    model_config = ConfigDict(extra="forbid")

    arguments: dict[str, Any] = Field(default_factory=dict)
    limits: ResourceRequest | None = None
    budget: Budget | None = None


class ToolCallResult(BaseModel):
    """A successful call: the tool's return value and what it cost.

    `result` is the tool's value (its structured content, unwrapped when it is a wrapped
    plain value; else its text; else its content blocks); `content` and `structuredContent`
    are the MCP result unchanged, as `/mcp` serves it (an image stays an image block)."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    tool: str
    result: Any
    content: list[dict[str, Any]] = Field(default_factory=list)
    structured_content: dict[str, Any] | None = Field(default=None, alias="structuredContent")
    usage: CallUsage
    budget: BudgetGrant | None = None
    trace_id: str

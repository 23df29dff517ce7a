"""What a running tool call reports before its result: progress and log messages.

A call is a stream (docs/architecture.md, "Where a tool runs"): these events come out of it, in
order, before its result or its error. Tool code reports them through its `ToolContext`
(`report_progress`, `log`); an MCP server's `notifications/progress` and
`notifications/message` become the same events. They reach an MCP caller as those two
notifications (`/mcp` answers the call as an event stream then). An event says nothing the
gateway trusts: it is shown to the caller, never used for accounting.

`LogLevel` is MCP's (RFC 5424's) severity scale, in order: a caller's `logging/setLevel`
keeps the messages at its level and above.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue, TypeAdapter

MAX_EVENT_TEXT = 1000  # a progress message's, a logger name's characters


class LogLevel(StrEnum):
    DEBUG = "debug"
    INFO = "info"
    NOTICE = "notice"
    WARNING = "warning"
    ERROR = "error"
    CRITICAL = "critical"
    ALERT = "alert"
    EMERGENCY = "emergency"

    @property
    def rank(self) -> int:
        return _RANKS[self]


_RANKS = {level: rank for rank, level in enumerate(LogLevel)}


class ProgressEvent(BaseModel):
    """How far the call is: `progress` out of `total` (if known), with a short message."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    kind: Literal["progress"] = "progress"
    progress: float
    total: float | None = None
    message: Annotated[str, Field(max_length=MAX_EVENT_TEXT)] | None = None


class LogEvent(BaseModel):
    """One log message of the call's tool or server (MCP `notifications/message`)."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    kind: Literal["log"] = "log"
    level: LogLevel
    data: JsonValue
    logger: Annotated[str, Field(max_length=MAX_EVENT_TEXT)] | None = None


CallEvent = Annotated[ProgressEvent | LogEvent, Field(discriminator="kind")]
CALL_EVENT: TypeAdapter[ProgressEvent | LogEvent] = TypeAdapter(CallEvent)


def progress_notification(event: ProgressEvent, token: str | int) -> dict[str, Any]:
    """The MCP `notifications/progress` of `event` for the caller's `progressToken`."""
    params: dict[str, Any] = {"progressToken": token, "progress": event.progress}
    if event.total is not None:
        params["total"] = event.total
    if event.message is not None:
        params["message"] = event.message
    return {"jsonrpc": "2.0", "method": "notifications/progress", "params": params}


def log_notification(event: LogEvent) -> dict[str, Any]:
    """The MCP `notifications/message` of `event`."""
    params: dict[str, Any] = {"level": event.level.value, "data": event.data}
    if event.logger is not None:
        params["logger"] = event.logger
    return {"jsonrpc": "2.0", "method": "notifications/message", "params": params}

"""What comes out of a tool call across the seam: an `Outcome`, a result or a SERF error with
the call's usage either way. Executors never raise for a tool's own failure."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from protocol import CallUsage, ErrorCode, InputRound, SerfError
from tools.tool_result import ToolResult

# Failures decided before the tool did any work: they say nothing about its latency or health.
NOT_RUN = frozenset(
    {
        ErrorCode.INVALID_ARGUMENTS,
        ErrorCode.TOOL_NOT_FOUND,
        ErrorCode.SANDBOX_UNAVAILABLE,
        ErrorCode.CLIENT_CAPABILITY_MISSING,  # stopped for the caller, not the tool's fault
    }
)


@dataclass(frozen=True)
class StartStage:
    """One stage of a sandbox's start (wall clock, ns since the epoch), for its trace: the
    engine's create and start (docker) or the spawn (bwrap, process), the runner's start to
    its hello, the tool modules' import."""

    name: str
    start_ns: int
    end_ns: int
    cpu_ms: float | None = None  # the sandbox's CPU in the stage, as its runner reported it


@dataclass(frozen=True)
class Outcome:
    usage: CallUsage
    result: Any = None  # the JSON value (a tool's: what REST shows as its `result`)
    # A tool's result as MCP content (its blocks, structured content, `_meta`), from every
    # executor that runs tools; None for a relayed MCP message or a plain function's value.
    output: ToolResult | None = None
    error: SerfError | None = None
    waited_ms: float | None = None  # the wait for a sandbox (queue, start): pooled runs only
    # The stages of the sandbox start the call waited for (none: it found one warm).
    start_stages: tuple[StartStage, ...] = ()
    # The tool's server answered the call with a round of questions for the client: not a
    # result, not a failure; the call is retried with the client's answers.
    input_required: InputRound | None = None

    @property
    def ok(self) -> bool:
        return self.error is None

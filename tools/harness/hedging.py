"""Tools whose first attempt is slow and whose hedge is fast, for the hedging tests.

Not served unless `tools.harness.hedging` is listed in `CONCLAVE_TOOL_MODULES`. Each call
writes `<marker>-<attempt>` into its sandbox's workspace (attempt: `first`, or `hedge` when
the gateway marked the call a hedged copy), then sleeps: `first_ms` on a first attempt,
`hedge_ms` on a hedge, in a `sleep` process whose command line holds `marker` (so a test
finds the attempt's processes on the machine; a marker is digits only). It returns which
attempt answered and the files of this marker its workspace holds: a hedge that sees its
first attempt's file would mean the attempts shared a workspace.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from protocol import ResourceIntent, ToolContext
from tools.registry import tool

_INTENT = ResourceIntent(memory_mb=64, cpu_seconds=5, timeout_ms=30_000)


def _attempt(
    marker: str, first_ms: int, hedge_ms: int, context: ToolContext | None
) -> dict[str, Any]:
    kind = "hedge" if context is not None and context.hedge else "first"
    root = Path(os.environ.get("CONCLAVE_WORKSPACE") or tempfile.gettempdir())
    (root / f"{marker}-{kind}").write_text(kind)
    sleep_ms = hedge_ms if kind == "hedge" else first_ms
    if sleep_ms > 0:
        # The marker's digits extend the sleep's own argument, so it names the attempt.
        _spawn(["sleep", f"{sleep_ms / 1000:.3f}{marker}"])
    files = sorted(p.name for p in root.iterdir() if p.name.startswith(f"{marker}-"))
    return {"attempt": kind, "files": files}


def _spawn(argv: list[str]) -> None:
    """Run `argv` to its end. On the process backend every sandbox of the machine shares one
    user, whose process cap other sandboxes may fill for a moment (a fork then fails EAGAIN):
    try again for up to two seconds rather than fail the call for someone else's load."""
    for _ in range(40):
        try:
            subprocess.run(argv, check=True)
            return
        except BlockingIOError:
            time.sleep(0.05)
    subprocess.run(argv, check=True)


@tool(idempotent=True, intent=_INTENT)
def slow_first(
    marker: str, first_ms: int = 0, hedge_ms: int = 0, context: ToolContext | None = None
) -> dict[str, Any]:
    """An idempotent tool: a first attempt sleeps `first_ms`, a hedge `hedge_ms`."""
    return _attempt(marker, first_ms, hedge_ms, context)


@tool(idempotent=False, intent=_INTENT)
def slow_first_unsafe(
    marker: str, first_ms: int = 0, hedge_ms: int = 0, context: ToolContext | None = None
) -> dict[str, Any]:
    """The same, not declared idempotent: the gateway must never run it twice."""
    return _attempt(marker, first_ms, hedge_ms, context)

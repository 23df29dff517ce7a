"""The rich Console every `conclave` command prints through.

Rich lays out for 80 columns whenever stdout is not a terminal, so a piped or captured
`conclave bench` cut its tables' rows. Here a terminal keeps its own width, `COLUMNS` wins
when set, and otherwise output that is not a terminal is laid out wide enough for any row.
"""

from __future__ import annotations

import os

from rich.console import Console

UNBOUNDED_WIDTH = 1000  # no table of ours is wider; a wider line would still wrap, not cut


def cli_console(*, stderr: bool = False) -> Console:
    """A Console on stdout (or stderr) that only wraps at a real terminal's width."""
    console = Console(stderr=stderr)
    if console.is_terminal or "COLUMNS" in os.environ:
        return console
    return Console(stderr=stderr, width=UNBOUNDED_WIDTH)

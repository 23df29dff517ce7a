"""The `conclave` command line: the app and its command groups (agents, state, tools,
sandbox, run). Nothing outside this package imports it; it imports the stack and the bench
only inside the commands that need them, so an HTTP-only command starts in tenths of a second."""

from conclave.cli.app import app, main

__all__ = [
    "app",
    "main",
]

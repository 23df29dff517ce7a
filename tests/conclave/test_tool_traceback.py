"""`conclave tools call NAME --debug`: a failing tool's own traceback, from the runner in the
sandbox, reaches the tools' author (the admin key's holder) who asked for it, and nobody
else: not the same call without --debug, not an agent's token alone, of any tenant."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from conclave import EmbeddedStack
from conclave.cli import app
from gateway import Settings
from protocol import ADMIN_KEY_HEADER, DEBUG_HEADER

ROOT = Path(__file__).resolve().parents[2]


def _example() -> str:
    """docs/cli.md's buggy tool, as the page shows it."""
    text = (ROOT / "docs/cli.md").read_text()
    return re.findall(r"<!-- example: mine.py -->\n```python\n(.*?)```", text, re.S)[0]


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedStack]:
    home = tmp_path_factory.mktemp("source")
    (home / "mine.py").write_text(_example())
    config = home / "conclave.toml"
    config.write_text('[[source]]\nname = "mine"\nkind = "python"\npath = "mine.py"\n')
    settings = Settings(port=0, sandbox_backend="process", config=config, data_dir=home / "data")
    with EmbeddedStack(settings) as running:
        yield running


def _call(*args: str) -> tuple[int, str]:
    done = CliRunner().invoke(
        app, ["tools", "call", "mine__divide", "--arg", "a=1", "--arg", "b=0", *args],
        env={"CONCLAVE_TOKEN": None, "CONCLAVE_ADMIN_KEY": None},
    )  # fmt: skip
    return done.exit_code, done.stderr


def test_the_tools_author_sees_the_tools_traceback_with_debug(stack: EmbeddedStack) -> None:
    token = stack.token("acme", "dev", ["tool:mine__*"])
    key = stack.settings.admin_key.get_secret_value()
    common = ("--gateway", stack.url, "--token", token)
    code, stderr = _call(*common, "--debug", "--admin-key", key)
    assert code == 1
    assert stderr.startswith("Traceback (most recent call last):"), stderr
    assert "mine.py" in stderr and "in _ratio" in stderr and "return a / b" in stderr
    assert "runner_loop.py" not in stderr  # the tool's frames, not the sandbox's own
    assert stderr.rstrip().splitlines()[-1].startswith("error: TOOL_FAILED: ZeroDivisionError")

    code, stderr = _call(*common)  # the same call, not asking
    assert code == 1 and "Traceback" not in stderr and "ZeroDivisionError" in stderr


def test_no_traceback_without_the_admin_key(stack: EmbeddedStack) -> None:
    body = {"arguments": {"a": 1, "b": 0}}
    url = f"{stack.url}/v1/tools/mine__divide/call"
    for tenant in ("acme", "other"):
        token = stack.token(tenant, "dev", ["tool:mine__*"])
        for extra in ({}, {ADMIN_KEY_HEADER: "not-the-key"}):
            headers = {"Authorization": f"Bearer {token}", DEBUG_HEADER: "1", **extra}
            answer = httpx.post(url, json=body, headers=headers, timeout=60)
            assert answer.status_code >= 400
            serf = answer.json()
            assert serf["code"] == "TOOL_FAILED" and "traceback" not in serf["details"], serf
    headers = {"Authorization": f"Bearer {token}", DEBUG_HEADER: "1", **stack.admin_headers}
    shown = httpx.post(url, json=body, headers=headers, timeout=60).json()
    assert "in _ratio" in shown["details"]["traceback"]

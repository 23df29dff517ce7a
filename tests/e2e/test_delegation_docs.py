"""docs/a2a.md's worked examples (its blocks marked `<!-- example: NAME -->`), run as a reader
runs them against a gateway serving the test A2A agent (`conclave.bench.a2a.echo_agent`) as
`research` and the page's hosted agent as declared there: the SDK's `Agent.delegate`, the
reference SDK's client, curl, a hosted agent's worker, and what a worker may do for its
callers."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from conclave.bench.a2a.echo_agent import running_agent
from conclave.stack import EmbeddedStack
from tests.e2e.conftest import e2e_settings
from tests.helpers import documented_example

PAGE = "docs/a2a.md"
ADMIN_KEY = "e2e-admin-key"  # e2e_settings'


@pytest.fixture(scope="module")
def research_stack(
    redis_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[EmbeddedStack]:
    with running_agent() as agent_url:
        config = Path(tmp_path_factory.mktemp("docs-a2a")) / "conclave.toml"
        hosted = documented_example(PAGE, "hosted.toml")  # the page's hosted agent, as written
        config.write_text(f'[[a2a_agent]]\nname = "research"\nurl = "{agent_url}"\n\n{hosted}')
        with EmbeddedStack(e2e_settings(redis_url, "process", config=config)) as stack:
            yield stack


def _run(stack: EmbeddedStack, name: str, tmp_path: Path, **env: str) -> str:
    script = tmp_path / name
    script.write_text(documented_example(PAGE, name))
    command = (
        [sys.executable, str(script)]
        if name.endswith(".py")
        else ["bash", "-euo", "pipefail", str(script)]
    )
    done = subprocess.run(
        command,
        cwd=tmp_path,
        env={**os.environ, "CONCLAVE_URL": stack.url, "CONCLAVE_ADMIN_KEY": ADMIN_KEY, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_the_sdk_example_delegates_and_continues_a_task(
    research_stack: EmbeddedStack, tmp_path: Path
) -> None:
    assert _run(research_stack, "delegate.py", tmp_path).splitlines() == [
        "TASK_STATE_COMPLETED echo: find the sources",
        "TASK_STATE_INPUT_REQUIRED which one?",
        "TASK_STATE_COMPLETED echo: the first one",
    ]


def test_the_reference_client_example_and_curl_reach_the_agent(
    research_stack: EmbeddedStack, tmp_path: Path
) -> None:
    token = research_stack.token("acme", "planner-doc", ["agent:research"])
    assert _run(research_stack, "a2a_sdk_client.py", tmp_path, PLANNER_TOKEN=token).strip() == (
        "echo: hello"
    )
    answer = json.loads(_run(research_stack, "curl.sh", tmp_path, PLANNER_TOKEN=token))
    assert answer["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"


def test_the_hosted_agent_example_serves_a_worker_and_answers_its_caller(
    research_stack: EmbeddedStack, tmp_path: Path
) -> None:
    assert _run(research_stack, "hosted_worker.py", tmp_path).splitlines() == [
        "TASK_STATE_COMPLETED writer sent 3 words",
    ]


def test_the_delegated_rights_example_refuses_the_writer_and_lets_the_editor(
    research_stack: EmbeddedStack, tmp_path: Path
) -> None:
    assert _run(research_stack, "delegated_rights.py", tmp_path).splitlines() == [
        "writer refused: POLICY_DENIED",
        "editor 3 words",
    ]

"""`conclave approvals ls|show|approve|deny` and `conclave quotas` against a real gateway
(two worker processes on one port, so a call and its approval may be served by different
processes): an approver sees the held call's exact arguments, approves one (it runs) and
denies another (its caller gets APPROVAL_DENIED with the note); an agent sees what its quota
has left."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner

from conclave.cli import app
from conclave.stack import EmbeddedStack
from gateway.config import Settings
from protocol import ADMIN_KEY_HEADER, DEADLINE_HEADER
from tests.helpers import wait_for

pytestmark = pytest.mark.system

ADMIN_KEY = "approvals-cli-admin-key"
RULE = """
[[policy]]
name = "big-echo"
tools = ["echo"]
when = "size(args.message) > 3"
outcome = "approve"
reason = "long messages need a person"

[[quota]]
name = "cli-echo"
agents = ["quota-*"]
tools = ["echo"]
per = ["agent"]
calls_per_day = 5
"""


@pytest.fixture(scope="module")
def stack(redis_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedStack]:
    config = tmp_path_factory.mktemp("approvals") / "conclave.toml"
    config.write_text(RULE)
    settings = Settings(
        redis_url=redis_url,
        port=0,
        workers=2,
        sandbox_backend="process",
        config=config,
        secret="approvals-secret-" + "a" * 32,
        admin_key=ADMIN_KEY,
    )
    with EmbeddedStack(settings) as running:
        yield running


def _token(url: str, agent: str, **rights: Any) -> str:
    body = {"tenant": "acme", "agent": agent, **rights}
    answer = httpx.post(f"{url}/v1/agents", json=body, headers={ADMIN_KEY_HEADER: ADMIN_KEY})
    assert answer.status_code == 201, answer.text
    token: str = answer.json()["token"]
    return token


def _call_in_background(url: str, token: str, message: str) -> list[httpx.Response]:
    answers: list[httpx.Response] = []
    deadline = str(int((time.time() + 30) * 1000))

    def call() -> None:
        answers.append(
            httpx.post(
                f"{url}/v1/tools/echo/call",
                json={"arguments": {"message": message}},
                headers={"Authorization": f"Bearer {token}", DEADLINE_HEADER: deadline},
                timeout=40,
            )
        )

    threading.Thread(target=call, daemon=True).start()
    return answers


def _pending_id(runner: CliRunner, env: dict[str, str], message: str) -> str:
    found: list[str] = []

    def listed() -> bool:
        done = runner.invoke(app, ["approvals", "ls", "--json"], env=env)
        assert done.exit_code == 0, done.output
        rows = [json.loads(line) for line in done.output.splitlines() if line.strip()]
        found[:] = [r["id"] for r in rows if r["arguments"] == {"message": message}]
        return bool(found)

    wait_for(listed, 10.0, f"a held call of {message!r} in `conclave approvals ls`")
    return found[0]


def test_an_approver_approves_and_denies_held_calls_from_the_command_line(
    stack: EmbeddedStack, tmp_path: Path
) -> None:
    caller = _token(stack.url, "payer", tools=["echo"])
    approver = _token(stack.url, "bob", approves=["echo"])
    env = {"CONCLAVE_URL": stack.url, "CONCLAVE_TOKEN": approver}
    runner = CliRunner()

    approved = _call_in_background(stack.url, caller, "pay 5000")
    approval_id = _pending_id(runner, env, "pay 5000")
    table = runner.invoke(app, ["approvals", "ls"], env=env)
    assert "payer" in table.output and "big-echo" in table.output
    assert '{"message": "pay 5000"}' in table.output
    shown = runner.invoke(app, ["approvals", "show", approval_id], env=env)
    assert shown.exit_code == 0 and "status:     pending" in shown.output
    assert "big-echo: long messages need a person" in shown.output
    done = runner.invoke(app, ["approvals", "approve", approval_id, "--note", "ok"], env=env)
    assert done.exit_code == 0, done.output
    assert f"{approval_id} approved by acme/bob" in done.output
    wait_for(lambda: bool(approved), 10.0, "the approved call's answer")
    assert approved[0].status_code == 200 and approved[0].json()["result"] == "pay 5000"

    denied = _call_in_background(stack.url, caller, "pay everything")
    denial_id = _pending_id(runner, env, "pay everything")
    done = runner.invoke(app, ["approvals", "deny", denial_id, "--note", "no"], env=env)
    assert done.exit_code == 0, done.output
    wait_for(lambda: bool(denied), 10.0, "the denied call's answer")
    assert denied[0].status_code == 403 and denied[0].json()["code"] == "APPROVAL_DENIED"
    assert denied[0].json()["details"]["note"] == "no"

    again = runner.invoke(app, ["approvals", "approve", denial_id], env=env)
    assert again.exit_code == 1 and "denied by acme/bob already" in again.output
    own = runner.invoke(app, ["approvals", "ls"], env={**env, "CONCLAVE_TOKEN": caller})
    assert own.exit_code == 0 and "no calls are waiting for your approval" in own.output


def test_conclave_quotas_prints_use_and_what_remains(stack: EmbeddedStack) -> None:
    token = _token(stack.url, "quota-bot", tools=["echo"])
    for _ in range(2):
        answer = httpx.post(
            f"{stack.url}/v1/tools/echo/call",
            json={"arguments": {"message": "hi"}},
            headers={"Authorization": f"Bearer {token}"},
        )
        assert answer.status_code == 200, answer.text
    done = CliRunner().invoke(app, ["quotas", "--token", token], env={"CONCLAVE_URL": stack.url})
    assert done.exit_code == 0, done.output
    [header, row] = done.output.splitlines()
    assert header.split()[:6] == ["QUOTA", "SUBJECT", "LIMIT", "USED", "ALLOWED", "REMAINING"]
    assert row.split()[:6] == ["cli-echo", "acme/quota-bot", "calls_per_day", "2", "5", "3"]

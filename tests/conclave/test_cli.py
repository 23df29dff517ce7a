"""The `conclave` command as a user runs it: a subprocess, its stdout, stderr and exit code."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from importlib.metadata import version
from pathlib import Path

import httpx
import pytest
from click.testing import Result
from typer.testing import CliRunner

from conclave import EmbeddedStack
from conclave.bench import SUITES
from conclave.cli import app
from conclave.stack.ports import free_port
from gateway import Settings

# Explicit secrets: a fresh data dir would add the "generated a new token secret" line.
SECRETS = {"CONCLAVE_SECRET": "s" * 40, "CONCLAVE_ADMIN_KEY": "a" * 40}


def conclave(
    *args: str, env: dict[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    # No COLUMNS: as in a pipe or a CI log, where nothing says how wide the output may be.
    clean = {
        k: v for k, v in os.environ.items() if not k.startswith("CONCLAVE_") and k != "COLUMNS"
    }
    return subprocess.run(
        [sys.executable, "-m", "conclave", *args],
        env={**clean, **(env or {})},
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def in_process(*args: str) -> Result:
    """The CLI in this process (its lines count in coverage), as `conclave ARGS` runs it."""
    return CliRunner().invoke(app, list(args), env={"CONCLAVE_TOKEN": None})


def test_version_is_the_installed_distributions() -> None:
    done = conclave("--version")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"conclave {version('conclave')}"


def test_bench_help_lists_every_suite_with_a_line_each() -> None:
    done = conclave("bench", "--help")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    for name in SUITES:
        described = [line for line in lines if line.split()[:1] == [name]]
        assert described and len(described[0].split()) > 3, (name, done.stdout)


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedStack]:
    settings = Settings(port=0, sandbox_backend="process", data_dir=tmp_path_factory.mktemp("data"))
    with EmbeddedStack(settings) as running:
        yield running


def test_agents_register_list_revoke_and_the_revoked_token_is_refused(
    stack: EmbeddedStack,
) -> None:
    data_dir = str(stack.settings.data_dir)  # the admin key is read from serve's data dir
    common = ("--gateway", stack.url, "--data-dir", data_dir)
    registered = conclave(
        "agents", "register", "--tenant", "acme", "--agent", "scout",
        "--tool", "echo", "--namespace", "notes=write", "--json", *common,
    )  # fmt: skip
    assert registered.returncode == 0, registered.stderr
    answer = json.loads(registered.stdout)
    assert answer["scopes"] == ["tool:echo", "state:notes:write"]
    headers = {"Authorization": f"Bearer {answer['token']}"}
    call = httpx.post(
        f"{stack.url}/v1/tools/echo/call", json={"arguments": {"message": "hi"}}, headers=headers
    )
    assert call.status_code == 200, call.text

    listed = conclave("agents", "list", *common)
    assert listed.returncode == 0, listed.stderr
    row = next(line for line in listed.stdout.splitlines() if "scout" in line)
    assert row.split()[:3] == ["acme", "scout", "active"] and "tool:echo" in row

    served = conclave("tools", "list", "--gateway", stack.url, "--token", answer["token"])
    assert served.returncode == 0, served.stderr
    assert served.stdout.split()[:3] == ["TOOL", "INTENT", "SOURCE"]
    assert [line.split()[0] for line in served.stdout.splitlines()[1:]] == ["echo"]
    everything = conclave("tools", "list", *common)  # the admin key: every tool
    assert everything.returncode == 0, everything.stderr
    assert len(everything.stdout.splitlines()) > 2 and "(built in)" in everything.stdout
    assert "run_python" in everything.stdout  # served, though scout may not call it
    assert "conclave-cli" not in conclave("agents", "list", *common).stdout  # no helper agent

    revoked = conclave("agents", "revoke", "--tenant", "acme", "--agent", "scout", *common)
    assert revoked.returncode == 0, revoked.stderr
    assert revoked.stdout.startswith("revoked acme/scout")
    again = httpx.post(
        f"{stack.url}/v1/tools/echo/call", json={"arguments": {"message": "hi"}}, headers=headers
    )
    assert again.status_code == 401, again.text
    listed = conclave("agents", "list", "--tenant", "acme", *common)
    assert "revoked" in next(line for line in listed.stdout.splitlines() if "scout" in line)


def test_tools_call_calls_through_the_gateway_as_the_tokens_agent(stack: EmbeddedStack) -> None:
    token = stack.token("acme", "caller", ["tool:echo"])
    common = ("--gateway", stack.url, "--token", token)
    done = in_process("tools", "call", "echo", "--arg", "message=hi there", *common)
    assert done.exit_code == 0, done.stderr
    assert json.loads(done.stdout) == "hi there"
    wrong = in_process("tools", "call", "echo", "--arg", "message=5", *common)  # JSON: a number
    assert wrong.exit_code == 1
    assert wrong.stderr.startswith("error: INVALID_ARGUMENTS: ")
    refused = in_process("tools", "call", "run_shell", "--arg", "command=id", *common)
    assert refused.exit_code == 1 and "TOOL_NOT_ALLOWED" in refused.stderr
    malformed = in_process("tools", "call", "echo", "--arg", "message", *common)
    assert malformed.exit_code == 1 and "write KEY=VALUE" in malformed.stderr


def test_state_get_and_history_read_through_the_gateway(stack: EmbeddedStack) -> None:
    token = stack.token("acme", "reader", ["state:cli-notes:write"])
    headers = {"Authorization": f"Bearer {token}"}
    assert httpx.put(f"{stack.url}/v1/state/cli-notes", json={}, headers=headers).is_success
    for step in (1, 2):
        commit = {"writes": [{"key": "plan", "value": {"step": step}}]}
        done = httpx.post(f"{stack.url}/v1/state/cli-notes/commit", json=commit, headers=headers)
        assert done.status_code == 200, done.text
    common = ("--gateway", stack.url, "--token", token)
    got = in_process("state", "get", "cli-notes", "plan", *common)
    assert got.exit_code == 0, got.stderr
    read = json.loads(got.stdout)
    assert (read["value"], read["version"]) == ({"step": 2}, 2)
    history = in_process("state", "history", "cli-notes", "--limit", "1", *common)
    assert history.exit_code == 0, history.stderr
    assert len(history.stdout.splitlines()) == 2  # two commits, one page each
    missing = in_process("state", "get", "no-such-ns", "plan", *common)
    assert missing.exit_code == 1 and "NAMESPACE_NOT_FOUND" in missing.stderr
    tokenless = in_process("state", "get", "cli-notes", "plan", "--gateway", stack.url)
    assert tokenless.exit_code == 1 and "pass --token" in tokenless.stderr


def test_state_ls_lists_the_keys_the_agent_may_read(stack: EmbeddedStack) -> None:
    writer = stack.token("acme", "lister", ["state:cli-keys:write"])
    headers = {"Authorization": f"Bearer {writer}"}
    assert httpx.put(f"{stack.url}/v1/state/cli-keys", json={}, headers=headers).is_success
    writes = [{"key": k, "value": 1} for k in ("plan", "notes/b", "a:1")]
    for _ in range(2):  # each at version 2
        done = httpx.post(
            f"{stack.url}/v1/state/cli-keys/commit", json={"writes": writes}, headers=headers
        )
        assert done.status_code == 200, done.text
    writes = [{"key": "zeta", "value": 0}]
    assert httpx.post(
        f"{stack.url}/v1/state/cli-keys/commit", json={"writes": writes}, headers=headers
    ).is_success
    reader = stack.token("acme", "peeker", ["state:cli-keys:read"])
    listed = in_process("state", "ls", "cli-keys", "--gateway", stack.url, "--token", reader)
    assert listed.exit_code == 0, listed.stderr
    rows = [line.split() for line in listed.stdout.splitlines()]
    assert rows == [
        ["KEY", "VERSION"],
        ["a:1", "2"],
        ["notes/b", "2"],
        ["plan", "2"],
        ["zeta", "1"],
    ]
    as_json = in_process(
        "state", "ls", "cli-keys", "--json", "--gateway", stack.url, "--token", reader
    )
    assert json.loads(as_json.stdout.splitlines()[0]) == {"key": "a:1", "version": 2}

    page = httpx.get(
        f"{stack.url}/v1/state/cli-keys/keys", params={"limit": 2, "after": "a:1"}, headers=headers
    ).json()
    assert page == {
        "keys": [{"key": "notes/b", "version": 2}, {"key": "plan", "version": 2}],
        "next_after": "plan",
    }
    others = stack.token("acme", "stranger", ["state:elsewhere:write"])  # no right on cli-keys
    refused = in_process("state", "ls", "cli-keys", "--gateway", stack.url, "--token", others)
    assert refused.exit_code == 1 and "NAMESPACE_NOT_FOUND" in refused.stderr
    tenant = stack.token("other", "lister", ["state:cli-keys:write"])  # same name, other tenant
    unseen = in_process("state", "ls", "cli-keys", "--gateway", stack.url, "--token", tenant)
    assert unseen.exit_code == 1 and "NAMESPACE_NOT_FOUND" in unseen.stderr


def test_agents_register_prints_the_token_alone(stack: EmbeddedStack) -> None:
    done = conclave(
        "agents", "register", "--tenant", "acme", "--agent", "solo", "--gateway", stack.url,
        env={"CONCLAVE_ADMIN_KEY": stack.settings.admin_key.get_secret_value()},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    token = done.stdout.strip()
    assert token.count(".") == 2 and "\n" not in token  # a JWT: TOKEN=$(conclave agents ...)


def test_serve_listens_where_conclave_host_and_port_say(tmp_path: Path) -> None:
    port = free_port()
    env = {
        **SECRETS,
        "CONCLAVE_HOST": "127.0.0.2",
        "CONCLAVE_PORT": str(port),
        "CONCLAVE_DATA_DIR": str(tmp_path),
    }
    clean = {k: v for k, v in os.environ.items() if not k.startswith("CONCLAVE_")}
    server = subprocess.Popen(
        [sys.executable, "-m", "conclave", "serve", "--unisolated-process-backend"],
        env={**clean, **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            assert server.poll() is None, server.communicate()
            try:
                answer = httpx.get(f"http://127.0.0.2:{port}/healthz", timeout=1)
                break
            except httpx.TransportError:
                assert time.monotonic() < deadline, "serve never answered on CONCLAVE_HOST:PORT"
                time.sleep(0.1)
        assert answer.status_code == 200
    finally:
        server.send_signal(signal.SIGINT)
        out, _ = server.communicate(timeout=30)
    assert f"http://127.0.0.2:{port}" in out


@pytest.fixture
def busy_port() -> Iterator[int]:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        yield taken.getsockname()[1]


def _team_file(tmp_path: Path, text: str) -> str:
    path = tmp_path / "team.py"
    path.write_text(text)
    return str(path)


def test_a_busy_port_is_one_line(busy_port: int, tmp_path: Path) -> None:
    env = {**SECRETS, "CONCLAVE_DATA_DIR": str(tmp_path)}
    done = conclave("serve", "--port", str(busy_port), "--unisolated-process-backend", env=env)
    _assert_one_line(done, "already in use", "--port")


@pytest.mark.docker
def test_a_missing_runtime_image_is_one_line(docker_engine: str, tmp_path: Path) -> None:
    env = {
        **SECRETS,
        "CONCLAVE_DATA_DIR": str(tmp_path),
        "CONCLAVE_DOCKER_HOST": docker_engine,
        "CONCLAVE_SANDBOX_IMAGE": "conclave-no-such-image:latest",
    }
    done = conclave("serve", "--port", "0", "--backend", "docker", env=env)
    _assert_one_line(done, "conclave-no-such-image:latest is missing", "build-image")


def test_a_bad_setting_is_one_line(tmp_path: Path) -> None:
    env = {**SECRETS, "CONCLAVE_DATA_DIR": str(tmp_path), "CONCLAVE_PORT": "abc"}
    done = conclave("serve", env=env)
    _assert_one_line(done, "CONCLAVE_PORT", "'abc'")


@pytest.mark.parametrize(
    "command",
    [
        ("agents", "list", "--admin-key", "k"),
        ("tools", "list", "--token", "t"),
        ("run", "TEAM", "--admin-key", "k"),
    ],
)
def test_an_unreachable_gateway_is_one_line(command: tuple[str, ...], tmp_path: Path) -> None:
    team = _team_file(
        tmp_path,
        "from agents import Agent, ScriptedModel\n"
        "agent = Agent('a', 'x', ScriptedModel(['hi']))\ntask = 't'\n",
    )
    args = [team if arg == "TEAM" else arg for arg in command]
    done = conclave(*args, "--gateway", "http://127.0.0.1:1", env=SECRETS)
    _assert_one_line(done, "not reachable", "conclave serve")


@pytest.mark.parametrize(
    ("text", "says"),
    [
        (None, "is not a file"),
        ("def broken(:\n", "line 1"),
        ("x = 1\n", "defines neither `team`"),
        ("import no_such_module_here\n", "ModuleNotFoundError"),
    ],
)
def test_a_bad_team_file_is_one_line(text: str | None, says: str, tmp_path: Path) -> None:
    path = _team_file(tmp_path, text) if text is not None else str(tmp_path / "missing.py")
    done = conclave("run", path, env=SECRETS)
    _assert_one_line(done, says, path)


def _assert_one_line(done: subprocess.CompletedProcess[str], *says: str) -> None:
    assert done.returncode != 0, done.stdout
    assert "Traceback" not in done.stderr + done.stdout
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    for fragment in says:
        assert fragment in lines[0], lines[0]


def test_a_piped_bench_keeps_every_table_row_on_one_line(tmp_path: Path) -> None:
    env = {"CONCLAVE_SANDBOX_BACKEND": "process", "CONCLAVE_DATA_DIR": str(tmp_path)}
    done = conclave("bench", "errors", "--quick", "--out", str(tmp_path), env=env, timeout=600)
    assert done.returncode == 0, done.stderr
    (results,) = tmp_path.glob("*/errors.json")
    goals = json.loads(results.read_text())["goals"]
    assert goals
    lines = done.stdout.splitlines()
    for goal in goals:  # the summary row: suite, goal, target, measured, met on one line
        assert any(
            goal["name"] in line and goal["measured"] in line and goal["target"] in line
            for line in lines
        ), (goal, done.stdout)
    assert max(len(line) for line in lines) > 80  # today: every line cut at 80


def test_a_conclave_toml_in_the_working_directory_is_read_without_config(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from conclave.stack.config_file import settings_from

    (tmp_path / "conclave.toml").write_text("[gateway]\nsandbox_pool_max = 7\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("CONCLAVE_CONFIG", raising=False)
    monkeypatch.delenv("CONCLAVE_SANDBOX_POOL_MAX", raising=False)
    settings = settings_from(None)
    assert settings.config == tmp_path / "conclave.toml"
    assert settings.sandbox.pool_max == 7

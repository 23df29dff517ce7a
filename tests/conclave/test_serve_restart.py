"""`conclave serve` restarted as a user restarts it (to add a tool, after a reboot): what was
registered, written and audited before is there after, and an old token still works. With
`--ephemeral` nothing is kept, and an old token is told its agent is unknown (not revoked).
A second serve on the same data directory is refused in one line."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from conclave.stack.ports import free_port

pytestmark = pytest.mark.system  # it starts stacks in its tests' bodies

SECRETS = {"CONCLAVE_SECRET": "s" * 40, "CONCLAVE_ADMIN_KEY": "a" * 40}
ADMIN = {"X-Conclave-Admin-Key": "a" * 40}


class Serve:
    """`conclave serve` on a free port with the process backend (the backend is not the point)."""

    def __init__(self, data_dir: Path, *extra: str) -> None:
        self.url = f"http://127.0.0.1:{free_port()}"
        clean = {k: v for k, v in os.environ.items() if not k.startswith("CONCLAVE_")}
        env = {**clean, **SECRETS, "CONCLAVE_DATA_DIR": str(data_dir)}
        port = self.url.rsplit(":", 1)[1]
        args = ["serve", "--port", port, "--unisolated-process-backend", *extra]
        self.process = subprocess.Popen(
            [sys.executable, "-m", "conclave", *args],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        deadline = time.monotonic() + 60
        while not self._answers():
            assert time.monotonic() < deadline, "conclave serve never answered /readyz"
            time.sleep(0.1)

    def _answers(self) -> bool:
        if self.process.poll() is not None:
            raise AssertionError(f"conclave serve exited: {self.process.communicate()}")
        try:
            return httpx.get(f"{self.url}/readyz", timeout=1).status_code == 200
        except httpx.TransportError:
            return False

    def stop(self) -> str:
        """Ctrl-C, as at a terminal; returns what it printed."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
        out, err = self.process.communicate(timeout=60)
        assert self.process.returncode == 0, err
        return out + err


@pytest.fixture
def started() -> Iterator[list[Serve]]:
    servers: list[Serve] = []
    yield servers
    for server in servers:
        if server.process.poll() is None:
            server.process.kill()
            server.process.communicate()


def _start(started: list[Serve], data_dir: Path, *extra: str) -> Serve:
    started.append(Serve(data_dir, *extra))
    return started[-1]


def test_a_restart_keeps_agents_tokens_state_and_audit(
    tmp_path: Path, started: list[Serve]
) -> None:
    first = _start(started, tmp_path)
    agent = {"tenant": "acme", "agent": "keeper", "tools": ["echo"]}
    agent["namespaces"] = {"notes": "write"}
    registered = httpx.post(f"{first.url}/v1/agents", json=agent, headers=ADMIN)
    assert registered.status_code == 201, registered.text
    bearer = {"Authorization": f"Bearer {registered.json()['token']}"}
    assert httpx.put(f"{first.url}/v1/state/notes", json={}, headers=bearer).status_code == 201
    commit = {"writes": [{"key": "plan", "value": {"step": 1}}]}
    committed = httpx.post(f"{first.url}/v1/state/notes/commit", json=commit, headers=bearer)
    assert committed.status_code == 200, committed.text
    call = {"arguments": {"message": "before"}}
    assert httpx.post(f"{first.url}/v1/tools/echo/call", json=call, headers=bearer).is_success
    printed = first.stop()
    assert "Traceback" not in printed
    assert f"kept in {tmp_path / 'redis'}" in printed

    again = _start(started, tmp_path)
    call = {"arguments": {"message": "after"}}
    answer = httpx.post(f"{again.url}/v1/tools/echo/call", json=call, headers=bearer)
    assert answer.status_code == 200, answer.text  # the old token, the same registration
    read = httpx.get(f"{again.url}/v1/state/notes/plan", headers=bearer)
    assert read.status_code == 200 and read.json()["value"] == {"step": 1}
    listed = httpx.get(f"{again.url}/v1/agents", headers=ADMIN).json()
    assert any(a["tenant"] == "acme" and a["agent"] == "keeper" for a in listed)
    query = {"tenant": "acme", "agent": "keeper"}

    def echoed() -> list[str]:
        audit = httpx.get(f"{again.url}/v1/audit", params=query, headers=ADMIN).json()
        return sorted(r["operation"] for r in audit if r["operation"] == "echo")

    deadline = time.monotonic() + 10  # the audit record of a call is written after its answer
    while echoed() != ["echo", "echo"]:
        assert time.monotonic() < deadline, f"the audit after the restart: {echoed()}"
        time.sleep(0.1)
    again.stop()

    fresh = _start(started, tmp_path, "--ephemeral")
    refused = httpx.post(f"{fresh.url}/v1/tools/echo/call", json=call, headers=bearer)
    assert refused.status_code == 401
    error = refused.json()
    assert error["code"] == "AUTH_INVALID" and error["action"] == "reauth"
    assert "no registration of acme/keeper" in error["message"]
    assert "revoked" not in error["message"]
    assert "ephemeral" in fresh.stop()


def test_a_second_serve_on_the_same_data_directory_is_refused(
    tmp_path: Path, started: list[Serve]
) -> None:
    _start(started, tmp_path)
    clean = {k: v for k, v in os.environ.items() if not k.startswith("CONCLAVE_")}
    env = {**clean, **SECRETS, "CONCLAVE_DATA_DIR": str(tmp_path)}
    second = subprocess.run(
        [sys.executable, "-m", "conclave", "serve", "--port", "0", "--unisolated-process-backend"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert second.returncode == 1
    lines = second.stderr.strip().splitlines()
    assert lines == [
        f"conclave serve: another Conclave's Redis uses {tmp_path / 'redis'}: stop it, or give"
        " this one another --data-dir (or --ephemeral)"
    ]

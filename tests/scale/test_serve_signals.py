"""`conclave serve` stopped by a signal, as an operator stops it: a subprocess on the docker
backend. SIGTERM with calls in flight: a bounded grace, SERF answers for the calls it cut,
no container or process left, out within 10 s. Ctrl-C at a terminal (SIGINT to the whole
process group) on docker and bwrap: the same answers, no traceback, back within the grace
plus 2 s. SIGKILL: nothing keeps serving."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import docker
import httpx
import pytest

from conclave.stack.ports import free_port
from tests.helpers import wait_for

# serial: timing-bound, so .ci/test runs it alone after the parallel pass.
pytestmark = pytest.mark.serial

SECRETS = {"CONCLAVE_SECRET": "s" * 40, "CONCLAVE_ADMIN_KEY": "a" * 40}
ADMIN = {"X-Conclave-Admin-Key": "a" * 40}
LABEL = "conclave.sandbox"
OWNER_LABEL = "conclave.owner_pid"


def _children(pid: int) -> list[int]:
    """Every descendant of `pid` (from /proc), gateway processes and redis-server included."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    found, frontier = [], [pid]
    while frontier:
        parent = frontier.pop()
        kids = [child for child, p in parents.items() if p == parent]
        found += kids
        frontier += kids
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


class Serve:
    """`conclave serve --backend docker` on a free port, and the agent calling through it."""

    def __init__(self, tmp_path: Path, backend: str = "docker") -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        clean = {k: v for k, v in os.environ.items() if not k.startswith("CONCLAVE_")}
        env = {**clean, **SECRETS, "CONCLAVE_DATA_DIR": str(tmp_path)}
        args = ["serve", "--port", str(self.port), "--backend", backend, "--workers", "2"]
        self.backend = backend
        self.output = tmp_path / "serve.out"
        with self.output.open("wb") as out:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "conclave", *args],
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its own process group, as a shell gives a job
            )
        wait_for(self._answers, 60, "conclave serve answering /readyz")
        self.descendants = _children(self.process.pid)
        agent = {"tenant": "ops", "agent": "shell", "tools": ["run_shell"]}
        registered = httpx.post(f"{self.url}/v1/agents", json=agent, headers=ADMIN)
        assert registered.status_code == 201, registered.text
        self.token = registered.json()["token"]

    def _answers(self) -> bool:
        assert self.process.poll() is None, "conclave serve exited before it answered"
        try:
            return httpx.get(f"{self.url}/readyz", timeout=1).status_code == 200
        except httpx.TransportError:
            return False

    def containers(self) -> list[str]:
        """This serve's sandbox containers (their owner is one of its gateway processes)."""
        client = docker.DockerClient(base_url=os.environ.get("DOCKER_HOST"))
        try:
            # The summaries of one list call: a container removed meanwhile is not looked up
            # again (`containers.list` inspects each one, and one gone raised NotFound).
            listed = client.api.containers(all=True, filters={"label": f"{LABEL}=1"})
            owners = {str(pid) for pid in self.descendants}
            return [c["Names"][0] for c in listed if c["Labels"].get(OWNER_LABEL) in owners]
        finally:
            client.close()


@pytest.fixture
def serve(docker_engine: str, tmp_path: Path) -> Iterator[Serve]:
    server = Serve(tmp_path)
    yield server
    if server.process.poll() is None:
        server.process.kill()
        server.process.wait()


@pytest.fixture(params=["docker", "bwrap"])
def serve_on(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Serve]:
    """`conclave serve` on each isolating backend (the engine or bwrap checked first)."""
    request.getfixturevalue("docker_engine" if request.param == "docker" else "bwrap_available")
    server = Serve(tmp_path, request.param)
    yield server
    if server.process.poll() is None:
        server.process.kill()
        server.process.wait()


def _long_calls(
    serve: Serve, count: int, command: str = "sleep 28"
) -> tuple[list[threading.Thread], list[httpx.Response]]:
    answers: list[httpx.Response] = []

    def call() -> None:
        answers.append(
            httpx.post(
                f"{serve.url}/v1/tools/run_shell/call",
                json={"arguments": {"command": command}},
                headers={"Authorization": f"Bearer {serve.token}"},
                timeout=60,
            )
        )

    threads = [threading.Thread(target=call) for _ in range(count)]
    for thread in threads:
        thread.start()
    return threads, answers


def test_sigterm_cuts_long_calls_with_serf_answers_and_leaves_nothing(serve: Serve) -> None:
    threads, answers = _long_calls(serve, 4)
    wait_for(lambda: len(serve.containers()) >= 4, 60, "four sandboxes running the calls")
    time.sleep(1.0)  # the calls are inside their sandboxes, sleeping
    asked = time.monotonic()
    serve.process.send_signal(signal.SIGTERM)
    serve.process.wait(timeout=15)
    took = time.monotonic() - asked
    for thread in threads:
        thread.join(timeout=5)
    assert took < 10, f"conclave serve took {took:.1f} s to exit after SIGTERM"
    assert len(answers) == 4, "a caller got no answer"
    for answer in answers:
        assert answer.status_code == 503, answer.text
        assert answer.json()["code"] == "SHUTTING_DOWN", answer.text
        assert answer.json()["retryable"] is True
    assert serve.containers() == []
    assert not [pid for pid in serve.descendants if _alive(pid)]


def test_ctrl_c_at_the_terminal_answers_calls_shutting_down_and_prints_no_traceback(
    serve_on: Serve,
) -> None:
    serve = serve_on
    command = f"sleep 28.{time.time_ns() % 10**6:06d}"  # unique: found in any pid namespace
    threads, answers = _long_calls(serve, 2, command)

    def both_running() -> bool:
        pids = [e.name for e in Path("/proc").iterdir() if e.name.isdigit()]
        return sum(_cmdline(int(pid)).strip() == command for pid in pids) >= 2

    wait_for(both_running, 60, "both calls running their command")
    asked = time.monotonic()
    os.killpg(serve.process.pid, signal.SIGINT)  # what a terminal's Ctrl-C sends
    serve.process.wait(timeout=30)
    took = time.monotonic() - asked
    for thread in threads:
        thread.join(timeout=5)
    printed = serve.output.read_text()
    assert serve.process.returncode == 0, printed
    assert "Traceback" not in printed, printed
    grace_s = 3.0  # CONCLAVE_SHUTDOWN_GRACE_S's default
    assert took < grace_s + 2, f"conclave serve took {took:.1f} s to exit after Ctrl-C"
    assert len(answers) == 2, "a caller got no answer"
    for answer in answers:
        assert answer.status_code == 503, answer.text
        assert answer.json()["code"] == "SHUTTING_DOWN", answer.text
    assert not [pid for pid in serve.descendants if _alive(pid)]
    if serve.backend == "docker":
        assert serve.containers() == []


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def test_sigkill_leaves_nothing_serving(serve: Serve) -> None:
    assert len(serve.descendants) >= 3  # two gateway processes and redis-server
    serve.process.send_signal(signal.SIGKILL)
    serve.process.wait(timeout=5)
    wait_for(
        lambda: not [pid for pid in serve.descendants if _alive(pid)],
        10,
        "the gateway processes and redis-server gone",
    )
    with pytest.raises(httpx.TransportError):
        httpx.get(f"{serve.url}/healthz", timeout=1)

"""`conclave serve --config` with tool sources: their images are prepared before the
readiness clock starts, with each step printed; a limit that is reached names the step and
the command that does it by hand; and no sandbox container is left behind."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import docker
import pytest

from sandbox.backends.docker import OWNER_LABEL

pytestmark = pytest.mark.system  # runs `conclave serve` in its tests' bodies

SECRETS = {"CONCLAVE_SECRET": "s" * 40, "CONCLAVE_ADMIN_KEY": "a" * 40}
TOOL = '''
from tools import tool

{before}

@tool
def size(count: int) -> str:
    """A byte count for people."""
    import humanize

    return humanize.naturalsize(count)
'''


def _config(home: Path, before: str = "") -> Path:
    (home / "sizes.py").write_text(TOOL.format(before=before))
    config = home / "conclave.toml"
    config.write_text(
        '[[source]]\nname = "sizes"\nkind = "python"\npath = "sizes.py"\n'
        'requirements = ["humanize==4.9.0"]\n'
    )
    return config


def _serve(config: Path, docker_engine: str, **env: str) -> subprocess.Popen[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("CONCLAVE_")}
    environment = {
        **clean,
        **SECRETS,
        "CONCLAVE_PORT": "0",
        "CONCLAVE_DATA_DIR": str(config.parent / "data"),
        "DOCKER_HOST": docker_engine,
        **env,
    }
    return subprocess.Popen(
        [sys.executable, "-m", "conclave", "serve", "--config", str(config), "--backend", "docker"],
        env=environment,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=config.parent,
    )


def _lines_until(server: subprocess.Popen[str], last: str, timeout_s: float) -> list[str]:
    """stdout's lines up to the one starting with `last` (the server may take minutes); past
    `timeout_s` the server is killed, its output ends, and the assertion says what came."""
    lines: list[str] = []
    assert server.stdout is not None
    watchdog = threading.Timer(timeout_s, server.kill)
    watchdog.start()
    try:
        for line in server.stdout:
            lines.append(line.rstrip("\n"))
            if line.startswith(last):
                return lines
    finally:
        watchdog.cancel()
    raise AssertionError(f"no line starting {last!r} within {timeout_s} s: {lines}")


def _ended(server: subprocess.Popen[str], timeout_s: float) -> str:
    """Its stderr once it has exited by itself; killed (and the test failed) past the limit."""
    try:
        return server.communicate(timeout=timeout_s)[1]
    except subprocess.TimeoutExpired:
        server.kill()
        server.communicate()
        raise


def _left_behind(engine: str, before: set[str]) -> list[str]:
    """Sandbox containers made since `before` whose gateway is gone."""
    client = docker.DockerClient(base_url=engine)
    try:
        found = client.containers.list(
            ignore_removed=True, all=True, filters={"label": OWNER_LABEL}
        )
        return [
            c.name
            for c in found
            if c.id not in before and not Path(f"/proc/{c.labels[OWNER_LABEL]}").exists()
        ]
    finally:
        client.close()


def _containers(engine: str) -> set[str]:
    client = docker.DockerClient(base_url=engine)
    try:
        return {
            c.id
            for c in client.containers.list(
                ignore_removed=True, all=True, filters={"label": OWNER_LABEL}
            )
        }
    finally:
        client.close()


def test_sources_are_prepared_before_the_readiness_clock_with_progress(
    docker_engine: str, tmp_path: Path
) -> None:
    server = _serve(_config(tmp_path), docker_engine)
    try:
        lines = _lines_until(server, "Ctrl-C stops it.", timeout_s=600)
    finally:
        server.terminate()
        server.communicate(timeout=60)  # its pipes closed
    gateway = next(i for i, line in enumerate(lines) if line.startswith("Conclave gateway"))
    progress = [line for line in lines[:gateway] if line.startswith("start ")]
    assert any("preparing 1 tool source(s)" in line for line in progress), lines
    assert any("source sizes: preparing its code and requirements" in line for line in progress)


def test_a_preparation_limit_names_the_step_and_the_command(
    docker_engine: str, tmp_path: Path
) -> None:
    config = _config(tmp_path)
    server = _serve(config, docker_engine, CONCLAVE_SOURCE_PREPARE_TIMEOUT_S="0.001")
    stderr = _ended(server, 300)
    assert server.returncode == 1, stderr
    assert "preparing the tool sources took longer than 0.001 s" in stderr
    assert "source sizes: preparing its code and requirements" in stderr
    assert f"conclave sandbox build-image --config {config}" in stderr


def test_a_readiness_limit_names_the_step_and_leaves_no_container(
    docker_engine: str, tmp_path: Path
) -> None:
    """The gateway is stuck importing a source in its discovery sandbox at the limit: it is
    stopped, and so is the sandbox it had started."""
    before = _containers(docker_engine)
    config = _config(tmp_path, before="import time\n\ntime.sleep(300)  # a slow import")
    server = _serve(config, docker_engine, CONCLAVE_READY_TIMEOUT_S="20")
    stderr = _ended(server, 600)
    assert server.returncode == 1, stderr
    assert "the gateway was not ready within 20 s (CONCLAVE_READY_TIMEOUT_S)" in stderr
    assert f"conclave tools check {config}" in stderr
    assert _left_behind(docker_engine, before) == []

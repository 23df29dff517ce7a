"""`conclave serve` finds an engine: the set-up's private dockerd, stopped, is started when no
engine answers (here one of the test's own, at its own paths, so the machine's engine that
everyone shares is never touched)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from conclave.stack.private_engine import PrivateEngine, answers, find_engine
from gateway import Settings

pytestmark = pytest.mark.system  # starts a dockerd in its tests' bodies


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[PrivateEngine]:
    """A private engine 'installed' (its data root made), not running; stopped afterwards."""
    if shutil.which("dockerd") is None or os.geteuid() != 0:
        pytest.fail("needs dockerd and root, as the set-up's engine does (.ci/lib.sh)")
    scratch = Path(tempfile.mkdtemp(prefix="cpe-", dir="/tmp"))  # a short socket path
    (scratch / "data").mkdir()
    made = PrivateEngine(
        socket=scratch / "docker.sock",
        data_root=scratch / "data",
        exec_root=scratch / "x",
        pidfile=scratch / "docker.pid",
        log=scratch / "dockerd.log",
    )
    try:
        yield made
    finally:
        if made.pidfile.exists():
            pid = int(made.pidfile.read_text())
            os.kill(pid, signal.SIGTERM)
            for _ in range(120):
                if not Path(f"/proc/{pid}").exists():
                    break
                subprocess.run(["sleep", "0.25"], check=False)
        subprocess.run(["umount", "-R", str(made.exec_root)], capture_output=True, check=False)
        shutil.rmtree(scratch, ignore_errors=True)


def test_serve_starts_the_private_engine_when_none_answers(
    engine: PrivateEngine, tmp_path: Path
) -> None:
    said: list[str] = []
    wanted = Settings(sandbox_backend="docker", docker_host=engine.host, data_dir=tmp_path)
    assert not answers(engine.host)
    found = find_engine(wanted, said.append, engine)
    assert found.docker_host == engine.host and answers(engine.host)
    assert said[0].startswith(f"no Docker engine answers at {engine.host}: starting")
    assert said[-1] == f"the private Docker engine answers at {engine.host} (it keeps running)"
    again: list[str] = []  # answering now: used as it is
    assert find_engine(wanted, again.append, engine) == wanted and again == []


def test_an_engine_the_user_named_or_another_backend_is_left_alone(
    engine: PrivateEngine, tmp_path: Path
) -> None:
    said: list[str] = []
    elsewhere = Settings(
        sandbox_backend="docker", docker_host=f"unix://{tmp_path}/theirs.sock", data_dir=tmp_path
    )
    assert find_engine(elsewhere, said.append, engine) == elsewhere
    on_bwrap = Settings(sandbox_backend="bwrap", docker_host=engine.host, data_dir=tmp_path)
    assert find_engine(on_bwrap, said.append, engine) == on_bwrap
    assert said == [] and not answers(engine.host)

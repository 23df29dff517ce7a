"""The runner when its host goes away mid-conversation: the gateway tears a killed call's
sandbox down and closes the socket with the runner's frames unread, which the runner sees as
a reset connection. It ends as at a clean close: orphans swept, exit 0, no traceback."""

from __future__ import annotations

import select
import socket
import subprocess
import sys
from pathlib import Path

import sandbox

RUNNER = Path(sandbox.__file__).parent / "runner"  # the folder every backend runs


def test_a_host_that_resets_the_connection_ends_the_runner_cleanly(tmp_path: Path) -> None:
    path = tmp_path / "host.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as listener:
        listener.bind(str(path))
        listener.listen(1)
        listener.settimeout(30)
        runner = subprocess.Popen(
            [sys.executable, str(RUNNER), "--connect", str(path), "--workspace", str(tmp_path)],
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            connection, _ = listener.accept()
            readable, _, _ = select.select([connection], [], [], 30)
            assert readable, "the runner sent no hello"
            connection.close()  # its hello unread: the runner's next read is reset
            _, stderr = runner.communicate(timeout=30)
        finally:
            runner.kill()
    assert runner.returncode == 0, stderr
    assert "Traceback" not in stderr

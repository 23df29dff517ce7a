"""Tool code in a bwrap sandbox is confined like in a docker one: an unprivileged host user,
a seccomp filter, and workspaces no other sandbox reaches.

Each attack runs real bwrap through the pool, with the built-in `run_shell` and `run_python`
tools; what the host sees is read from the host (/proc, the cgroup, the file system).
"""

from __future__ import annotations

import errno
import shutil
import stat
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from sandbox.backend import SANDBOX_RUNNER
from sandbox.backends.bwrap import BwrapBackend
from sandbox.backends.cgroup import SandboxCgroup
from sandbox.pool import SandboxPool
from sandbox.pool.sandbox_uids import FIRST_SANDBOX_UID
from sandbox.runner import SOCKET_NAME
from tests.sandbox.conftest import TOOL_MODULES, invocation
from tools.calls import Outcome

pytestmark = pytest.mark.anyio
OTHER_UID = 1000  # a host user that is not the sandbox's


def _searchable_dir() -> Path:
    """A new directory every host user may search: pytest's own temporary directories are
    root's 0700 and would hide a leak."""
    shared = Path(tempfile.mkdtemp(prefix="conclave-confinement-"))
    shared.chmod(0o755)
    return shared


@pytest.fixture
async def pool(bwrap_available: None) -> AsyncIterator[SandboxPool]:
    """A bwrap pool whose workspace root the pool makes itself."""
    shared = _searchable_dir()
    sandboxes = SandboxPool(
        BwrapBackend(), tool_modules=TOOL_MODULES, workspace_root=shared / "sandboxes"
    )
    await sandboxes.open()
    try:
        yield sandboxes
    finally:
        await sandboxes.aclose()
        shutil.rmtree(shared, ignore_errors=True)


async def _run(pool: SandboxPool, tool: str, tenant: str = "acme", **arguments: Any) -> Outcome:
    outcome = await pool.execute(invocation(tool, arguments, tenant=tenant, module="tools.builtin"))
    assert outcome.ok, outcome.error
    return outcome


def _sandbox_id(outcome: Outcome) -> str:
    assert outcome.usage.sandbox is not None
    return outcome.usage.sandbox.split(":", 1)[1]


def _argv(pid: int) -> list[str]:
    """The process's command line; [] once it is gone (the call's child, reaped since the
    group was listed: the runner itself lives on)."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")
    except FileNotFoundError:
        return []


def _status(pid: int) -> dict[str, str]:
    lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    return {key: value.strip() for key, _, value in (line.partition(":") for line in lines)}


async def test_the_sandbox_processes_are_not_host_root(pool: SandboxPool) -> None:
    outcome = await _run(pool, "run_shell", command="id -u")
    uid = int(outcome.result["stdout"])  # its own (tests/sandbox/pool/test_sandbox_uids.py)
    assert uid >= FIRST_SANDBOX_UID
    pids = SandboxCgroup(_sandbox_id(outcome), "acme").pids()
    runners = [p for p in pids if _argv(p)[1:3] == ["-B", SANDBOX_RUNNER]]  # not bwrap's own
    assert runners, f"no runner among the sandbox's processes {pids}"
    for pid in runners:
        status = _status(pid)
        # real, effective, saved and file-system uid, as the host's kernel sees them
        assert status["Uid"].split() == [str(uid)] * 4
        assert status["Gid"].split() == [str(uid)] * 4
        assert int(status["CapEff"], 16) == 0 and int(status["CapBnd"], 16) == 0
        assert status["NoNewPrivs"] == "1" and status["Seccomp"] == "2"  # filtered


PROBE = """
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
CLONE_NEWUSER, CLONE_NEWNET, SIGCHLD = 0x10000000, 0x40000000, 17

def errno_of(result):
    return ctypes.get_errno() if result == -1 else 0

def clone(flags):
    pid = libc.syscall(56, flags | SIGCHLD, 0, 0, 0, 0)
    if pid == 0:
        os._exit(0)
    if pid > 0:
        os.waitpid(pid, 0)
    return errno_of(pid)

{
    "unshare_user": errno_of(libc.unshare(CLONE_NEWUSER)),
    "clone_newuser": clone(CLONE_NEWUSER),
    "clone_newnet": clone(CLONE_NEWNET),
    "mount": errno_of(libc.mount(b"none", b"/tmp", b"tmpfs", 0, None)),
    "bpf": errno_of(libc.syscall(321, 0, None, 0)),
    "keyctl": errno_of(libc.syscall(250, 0, -1, 0, 0, 0)),
    "plain_fork": clone(0),
    "ptrace_traceme": errno_of(libc.ptrace(0, 0, None, None)),  # last: a tracee stops on forks
}
"""


async def test_namespaces_mounts_ptrace_and_bpf_are_refused_with_eperm(pool: SandboxPool) -> None:
    outcome = await _run(pool, "run_python", code=PROBE)
    refused = outcome.result["return_value"]
    assert refused == {
        "unshare_user": errno.EPERM,
        "clone_newuser": errno.EPERM,
        "clone_newnet": errno.EPERM,
        "mount": errno.EPERM,
        "bpf": errno.EPERM,
        "keyctl": errno.EPERM,
        "plain_fork": 0,  # processes still start
        "ptrace_traceme": errno.EPERM,
    }
    shell = await _run(pool, "run_shell", command="unshare -U true; unshare -r id; echo done")
    assert shell.result["stdout"].strip() == "done"
    assert shell.result["stderr"].count("Operation not permitted") == 2


async def test_the_workspace_root_is_closed_and_the_runner_socket_0600(pool: SandboxPool) -> None:
    outcome = await _run(pool, "run_shell", command="true")
    root = pool.workspace_root.stat()
    # No one else lists or changes the root (root's gateway lets the process backend's
    # runner pass through it: 0711); no one else enters a workspace.
    assert stat.S_IMODE(root.st_mode) & 0o066 == 0 and root.st_uid == 0
    workspace = pool.workspace_root / _sandbox_id(outcome)
    mode = workspace.stat()
    assert stat.S_IMODE(mode.st_mode) == 0o700 and mode.st_uid >= FIRST_SANDBOX_UID
    socket = (workspace / SOCKET_NAME).stat()
    assert stat.S_ISSOCK(socket.st_mode)
    assert (stat.S_IMODE(socket.st_mode), socket.st_uid) == (0o600, mode.st_uid)


async def test_one_sandbox_cannot_read_another_sandboxs_workspace(pool: SandboxPool) -> None:
    victim = await _run(pool, "run_shell", command="echo s3cret > secret.txt")
    secret = pool.workspace_root / _sandbox_id(victim) / "secret.txt"
    assert secret.read_text() == "s3cret\n"

    # From another tenant's sandbox: by the host path, and through other processes' roots.
    attempt = f"cat {secret} /proc/*/root/workspace/secret.txt; ls {pool.workspace_root}"
    attacker = await _run(pool, "run_shell", tenant="globex", command=attempt)
    assert _sandbox_id(attacker) != _sandbox_id(victim)
    assert "s3cret" not in attacker.result["stdout"]
    assert _sandbox_id(victim) not in attacker.result["stdout"]

    # On the host, as any other unprivileged user.
    as_another_user = ["setpriv", f"--reuid={OTHER_UID}", f"--regid={OTHER_UID}"]
    host = await anyio.run_process(
        [*as_another_user, "--clear-groups", "cat", str(secret)], check=False
    )
    assert host.returncode != 0 and b"s3cret" not in host.stdout
    assert b"Permission denied" in host.stderr

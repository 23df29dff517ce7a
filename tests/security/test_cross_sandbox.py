"""No sandbox reaches another's processes, nor its own runner (issue 43), on every backend.

A victim sandbox holds a call open (the harness's `hold_for_host`, a named process); the host
names its pids. Tool code in another tenant's sandbox then tries each attack against the
victim's tool process, the victim's runner and its own runner: a signal (`kill`, and
`pidfd_send_signal` through a pidfd), `ptrace` (seize), `process_vm_readv` (8 real bytes),
`pidfd_getfd` (every descriptor below 64), reading `/proc/<pid>/environ`, opening
`/proc/<pid>/mem` for writing, and connecting to the host's socket for the victim's runner
and for its own. Every attempt must fail, and the victim's call still answers.

On main before issue 43 (every backend ran all tools as uid 65534): on `process`, every
attack on the victim's tool process succeeded, so did the connection to the victim's runner
socket and signals to both runners; on bwrap and docker (a pid namespace each) only the
signals to the attacker's own runner did.
"""

from __future__ import annotations

import os
import textwrap

import anyio
import pytest

from sandbox.pool import SandboxPool
from sandbox.runner import SOCKET_NAME
from tests.sandbox.conftest import (
    ALL_BACKENDS,
    PoolFactory,
    invocation,
    parent_of,
    processes_named,
    unique_name,
)
from tests.sandbox.conftest import make_pool as make_pool  # the pools, closed after
from tools.calls import Outcome

pytestmark = pytest.mark.anyio


ATTACK = textwrap.dedent(
    """
    import ctypes, errno, os, signal, socket
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long

    def syscall(number, *args):
        ctypes.set_errno(0)
        done = libc.syscall(ctypes.c_long(number), *[ctypes.c_long(a) for a in args])
        return done, ("ok" if done >= 0 else errno.errorcode[ctypes.get_errno()])

    class IoVec(ctypes.Structure):
        _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]

    def attack(pid):
        seen = {}
        try:
            os.kill(pid, signal.SIGCONT)  # harmless if it lands; it must not
            seen["kill"] = "ok"
        except OSError as exc:
            seen["kill"] = errno.errorcode[exc.errno]
        pidfd, opened = syscall(434, pid, 0)
        if pidfd >= 0:
            _, seen["pidfd_send_signal"] = syscall(424, pidfd, signal.SIGCONT, 0, 0)
            taken = [fd for fd in range(64) if syscall(438, pidfd, fd, 0)[0] >= 0]
            seen["pidfd_getfd"] = "ok" if taken else syscall(438, pidfd, 0, 0)[1]
            os.close(pidfd)
        else:
            seen["pidfd_send_signal"] = seen["pidfd_getfd"] = opened
        seized, seen["ptrace"] = syscall(101, 0x4206, pid, 0, 0)  # PTRACE_SEIZE: no stop
        if seized >= 0:
            syscall(101, 17, pid, 0, 0)  # PTRACE_DETACH
        buffer = ctypes.create_string_buffer(8)
        local = IoVec(ctypes.addressof(buffer), 8)
        remote = IoVec(0x400000, 8)
        _, read = syscall(310, pid, ctypes.addressof(local), 1, ctypes.addressof(remote), 1, 0)
        seen["process_vm_readv"] = "ok" if read == "EFAULT" else read  # EFAULT: let in
        for name, mode in (("environ", "rb"), ("mem", "r+b")):
            try:
                with open(f"/proc/{pid}/{name}", mode, buffering=0) as proc_file:
                    if mode == "rb":
                        proc_file.read(1)
                seen["proc_" + name] = "ok"
            except OSError as exc:
                seen["proc_" + name] = errno.errorcode[exc.errno]
        return seen

    def connect(path):
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
                client.connect(path)
            return "ok"
        except OSError as exc:
            return errno.errorcode[exc.errno]

    found = {name: attack(pid) for name, pid in targets.items()}
    found["own runner"] = attack(os.getppid())
    found["sockets"] = {path: connect(path) for path in sockets}
    found
    """
)


async def _victim_holding(pool: SandboxPool, name: str, done: list[Outcome]) -> None:
    done.append(await pool.execute(invocation("hold_for_host", {"name": name}, tenant="acme")))


@pytest.mark.parametrize("backend", ALL_BACKENDS)
async def test_no_tool_reaches_another_sandbox_or_its_runner(
    backend: str, make_pool: PoolFactory
) -> None:
    pool = await make_pool(backend)
    victim_done: list[Outcome] = []
    marker = unique_name("victim")  # the victim's tool process's name (/proc/<pid>/comm)
    async with anyio.create_task_group() as calls:
        calls.start_soon(_victim_holding, pool, marker, victim_done)
        with anyio.fail_after(30):
            while not (named := processes_named(marker)):  # noqa: ASYNC110 (a host process, no event)
                await anyio.sleep(0.02)
        (victim_tool,) = named
        victim_runner = parent_of(victim_tool)
        sandbox_dirs = [p for p in pool.workspace_root.iterdir() if p.is_dir()]
        victim_socket = str(sandbox_dirs[0] / SOCKET_NAME)
        code = f"import os\ntargets = {{'tool': {victim_tool}, 'runner': {victim_runner}}}\n"
        code += (
            f"sockets = [{victim_socket!r}, os.environ['CONCLAVE_WORKSPACE'] + '/{SOCKET_NAME}']"
        )
        attacker = await pool.execute(
            invocation(
                "run_python", {"code": code + ATTACK}, tenant="globex", module="tools.builtin"
            )
        )
        assert attacker.ok, attacker.error
        seen = attacker.result["return_value"]
        assert processes_named(marker) == [victim_tool], "the victim's tool process died"
        os.kill(victim_tool, 9)  # the host ends the victim's call
    let_in = {
        (target, attack)
        for target, attacks in seen.items()
        for attack, outcome in attacks.items()
        if outcome == "ok"
    }
    assert sorted(let_in) == [], seen
    assert victim_done and not victim_done[0].ok  # killed by the host, not by the attacker

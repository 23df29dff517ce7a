"""The runner's guard against its own tools' signals: a seccomp filter each child installs.

Tool code runs under the runner's uid (a sandbox's processes share one), so the kernel lets
it signal the runner; a killed runner is a sandbox torn down and started again, the cost
passed to whoever shares the machine. Being non-dumpable shuts ptrace, /proc/<pid>/mem and
`pidfd_getfd`, but not signals. So every process the runner forks for tool code (a call's
child, an MCP server) installs, before any tool code runs, a filter answering EPERM to:

- `kill`, `tkill`, `tgkill`, `rt_sigqueueinfo` and `rt_tgsigqueueinfo` aimed at the runner,
  its process group, every process (`-1`), or the namespace's init (pid 1: docker's init
  passes signals on to the runner);
- `pidfd_send_signal` (a pidfd names its process in memory a filter cannot read; a
  /proc/<pid> directory is one too);
- `setpgid` into the runner's process group (from where `kill(0, ...)` would reach it).

Filters stack: the sandbox's own (`sandbox.backends.seccomp`) still applies. The numbers are
x86_64's and aarch64's; on another machine `guard_program` builds none and tool code there
may still signal its runner (the sandbox is then replaced, as after any runner's death).
Standard library only, as all of the runner.
"""

from __future__ import annotations

import ctypes
import os
import struct

from .call_supervision import LIBC

PR_SET_NO_NEW_PRIVS = 38
PR_SET_SECCOMP = 22
SECCOMP_MODE_FILTER = 2
SECCOMP_RET_ALLOW = 0x7FFF0000
SECCOMP_RET_ERRNO = 0x00050000
EPERM = 1

# machine -> (AUDIT_ARCH, signal calls aimed by their first argument, pidfd_send_signal, setpgid)
_CALLS = {
    "x86_64": (0xC000003E, (62, 200, 234, 129, 297), 424, 109),
    "aarch64": (0xC00000B7, (129, 130, 131, 138, 240), 424, 154),
}

# Classic BPF: load word, jump if equal / greater or equal, return.
_LD_W_ABS, _JEQ_K, _JGE_K, _RET_K = 0x20, 0x15, 0x35, 0x06
_ARCH, _NR, _ARG0_LOW, _ARG1_LOW = 4, 0, 16, 24
_X32_BIT = 0x40000000

# One step: (code, k, label jumped to if true, label if false); None: the next step.
_Step = tuple[int, int, str | None, str | None]


class _Program(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def _assemble(steps: list[_Step | str]) -> bytes:
    """Steps and labels (plain strings) to BPF, each jump resolved to its label's offset."""
    places: dict[str, int] = {}
    count = 0
    for step in steps:
        if isinstance(step, str):
            places[step] = count
        else:
            count += 1
    out, here = [], 0
    for step in steps:
        if isinstance(step, str):
            continue
        code, k, true, false = step
        jt = 0 if true is None else places[true] - here - 1
        jf = 0 if false is None else places[false] - here - 1
        out.append(struct.pack("=HBBI", code, jt, jf, k & 0xFFFFFFFF))
        here += 1
    return b"".join(out)


def guard_program(runner: int, group: int, machine: str | None = None) -> bytes | None:
    """The filter protecting `runner` (pid) and its process `group`; None: unknown machine."""
    calls = _CALLS.get(machine or os.uname().machine)
    if calls is None:
        return None
    arch, aimed, pidfd_send_signal, setpgid = calls
    shielded = sorted({runner, -runner, -group, -1, 1} - {0})
    steps: list[_Step | str] = [
        (_LD_W_ABS, _ARCH, None, None),
        (_JEQ_K, arch, None, "deny"),  # another ABI (i386, x32) dodges the numbers: refused
        (_LD_W_ABS, _NR, None, None),
        (_JGE_K, _X32_BIT, "deny", None),
        (_JEQ_K, pidfd_send_signal, "deny", None),
        (_JEQ_K, setpgid, "setpgid", None),
        *[(_JEQ_K, number, "aimed", None) for number in aimed[:-1]],
        (_JEQ_K, aimed[-1], "aimed", "allow"),
        "setpgid",
        (_LD_W_ABS, _ARG1_LOW, None, None),
        (_JEQ_K, group, "deny", "allow"),
        "aimed",
        (_LD_W_ABS, _ARG0_LOW, None, None),
        *[(_JEQ_K, pid, "deny", None) for pid in shielded],
        "allow",  # jumps only go forward: both answers come last
        (_RET_K, SECCOMP_RET_ALLOW, None, None),
        "deny",
        (_RET_K, SECCOMP_RET_ERRNO | EPERM, None, None),
    ]
    return _assemble(steps)


def install_guard(program: bytes | None) -> None:
    """Install `program` in this process (a child about to run tool code), for good."""
    if program is None:
        return
    buffer = ctypes.create_string_buffer(program, len(program))
    fprog = _Program(len(program) // 8, ctypes.addressof(buffer))
    if LIBC.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        os._exit(126)
    if LIBC.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0) != 0:
        os._exit(126)  # no tool code runs unguarded

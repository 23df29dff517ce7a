"""The seccomp filter every isolating sandbox runs under: one list of denied system calls,
compiled to a classic-BPF program for `bwrap --seccomp`, and written as a Docker seccomp
profile (`docker_profile`) for the docker backend's containers.

It denies, with EPERM, the system calls that reach past the sandbox's walls or into the
kernel's least-reviewed code, which tool code never needs:

- new namespaces: `unshare`, `setns`, and `clone` with any CLONE_NEW* flag. A nested user
  namespace hands its creator every capability inside it, the usual first step of a kernel
  exploit. `clone3` passes its flags in memory a filter cannot read, so it answers ENOSYS and
  the C library falls back to `clone` (what Docker's default profile does);
- mounts: `mount`, `umount2`, `pivot_root` and the new mount API (`open_tree`, `move_mount`,
  `fsopen`, `fsconfig`, `fsmount`, `fspick`, `mount_setattr`): the sandbox's view of the files
  is fixed by bwrap;
- reading or steering other processes: `ptrace`, `process_vm_readv`, `process_vm_writev`,
  `pidfd_open` and `pidfd_getfd` (with which tool code took the runner's socket to the host
  and wrote its own replies); the runner is not dumpable either, so /proc/<pid>/mem is shut;
- kernel attack surface: `bpf`, `perf_event_open`, `io_uring_*`, `userfaultfd`, the keyring
  (`keyctl`, `add_key`, `request_key`), `kexec_load`, `kexec_file_load`, handle-based opens
  and the module calls.

Everything else is allowed (the docker profile replaces Docker's default one, whose other
denials need capabilities the containers do not have). The numbers are x86_64's; a system
call made through another ABI (i386's `int 0x80`, x32) would dodge them, so those kill the
process or answer EPERM, and `filter_program` refuses to build a filter for any other machine
rather than run unfiltered.
"""

from __future__ import annotations

import errno
import json
import platform
import struct

from sandbox.backend import SandboxStartError

# x86_64 system call numbers (asm/unistd_64.h).
DENIED_SYSCALLS = {
    "ptrace": 101,
    "pivot_root": 155,
    "mount": 165,
    "umount2": 166,
    "init_module": 175,
    "delete_module": 176,
    "kexec_load": 246,
    "add_key": 248,
    "request_key": 249,
    "keyctl": 250,
    "unshare": 272,
    "perf_event_open": 298,
    "setns": 308,
    "process_vm_readv": 310,
    "process_vm_writev": 311,
    "finit_module": 313,
    "kexec_file_load": 320,
    "bpf": 321,
    "userfaultfd": 323,
    "open_by_handle_at": 304,
    "io_uring_setup": 425,
    "io_uring_enter": 426,
    "io_uring_register": 427,
    "open_tree": 428,
    "move_mount": 429,
    "fsopen": 430,
    "fsconfig": 431,
    "fsmount": 432,
    "fspick": 433,
    "pidfd_open": 434,
    "pidfd_getfd": 438,
    "mount_setattr": 442,
}
_CLONE = 56
_CLONE3 = 435
_X32_SYSCALL_BIT = 0x40000000
# CLONE_NEWNS | CLONE_NEWCGROUP | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWUSER | CLONE_NEWPID
# | CLONE_NEWNET
NAMESPACE_FLAGS = 0x7E020000
_AUDIT_ARCH_X86_64 = 0xC000003E

# struct seccomp_data: nr at 0, arch at 4, args[0] at 16 (its low 32 bits, little-endian).
_NR, _ARCH, _ARG0_LOW = 0, 4, 16
# Classic-BPF opcodes.
_LD_ABS = 0x20  # BPF_LD | BPF_W | BPF_ABS
_JEQ = 0x15  # BPF_JMP | BPF_JEQ | BPF_K
_JGE = 0x35  # BPF_JMP | BPF_JGE | BPF_K
_JSET = 0x45  # BPF_JMP | BPF_JSET | BPF_K
_RET = 0x06  # BPF_RET | BPF_K
_ALLOW = 0x7FFF0000
_KILL_PROCESS = 0x80000000
_ERRNO = 0x00050000


def _insn(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    """One `struct sock_filter`: u16 code, u8 jt, u8 jf, u32 k, in the host's byte order."""
    return struct.pack("=HBBI", code, jt, jf, k)


def _deny(errno_value: int) -> bytes:
    return _insn(_RET, _ERRNO | errno_value)


def filter_program() -> bytes:
    """The compiled filter, ready to be read by `bwrap --seccomp FD`."""
    _check_machine()
    program = [
        _insn(_LD_ABS, _ARCH),
        _insn(_JEQ, _AUDIT_ARCH_X86_64, jt=1),
        _insn(_RET, _KILL_PROCESS),
        _insn(_LD_ABS, _NR),
        _insn(_JGE, _X32_SYSCALL_BIT, jf=1),
        _deny(errno.EPERM),
        # clone: denied only when it asks for a new namespace.
        _insn(_JEQ, _CLONE, jf=4),
        _insn(_LD_ABS, _ARG0_LOW),
        _insn(_JSET, NAMESPACE_FLAGS, jf=1),
        _deny(errno.EPERM),
        _insn(_RET, _ALLOW),
        _insn(_JEQ, _CLONE3, jf=1),
        _deny(errno.ENOSYS),
    ]
    for number in DENIED_SYSCALLS.values():
        program += [_insn(_JEQ, number, jf=1), _deny(errno.EPERM)]
    program.append(_insn(_RET, _ALLOW))
    return b"".join(program)


def docker_profile() -> str | None:
    """The same denials as a Docker seccomp profile (JSON, for `security_opt` "seccomp=").

    None on a machine that is not x86_64: containers keep Docker's default profile there
    (the runner, not dumpable, still cannot be ptraced, read or robbed of descriptors)."""
    if platform.machine() != "x86_64":
        return None
    deny = {"action": "SCMP_ACT_ERRNO", "errnoRet": errno.EPERM}
    rules: list[dict[str, object]] = [{"names": sorted(DENIED_SYSCALLS), **deny}]
    # clone with any CLONE_NEW* flag: one rule per flag (a rule matches when its bit is set).
    for bit in range(32):
        flag = 1 << bit
        if NAMESPACE_FLAGS & flag:
            masked = {"index": 0, "value": flag, "valueTwo": flag, "op": "SCMP_CMP_MASKED_EQ"}
            rules.append({"names": ["clone"], **deny, "args": [masked]})
    rules.append({"names": ["clone3"], "action": "SCMP_ACT_ERRNO", "errnoRet": errno.ENOSYS})
    profile = {
        "defaultAction": "SCMP_ACT_ALLOW",
        "architectures": ["SCMP_ARCH_X86_64"],
        "syscalls": rules,
    }
    return json.dumps(profile, separators=(",", ":"))


def _check_machine() -> None:
    machine = platform.machine()
    if machine != "x86_64":
        raise SandboxStartError(
            f"the sandbox's seccomp filter is written for x86_64, not {machine}: "
            "isolating sandboxes cannot run on this machine"
        )

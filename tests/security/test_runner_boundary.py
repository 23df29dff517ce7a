"""The runner is a boundary against the tool (issue 26), on bwrap and docker.

Tool code (`run_python`) tries to reach its runner: take the runner's socket to the host
with `pidfd_getfd`, open a pidfd on it, write its memory (`process_vm_writev`,
/proc/<runner>/mem), attach to it with `ptrace`, or set up `io_uring`. Before: on bwrap it
took the socket and wrote its own reply (48 MiB through a 1 MiB cap), and on both backends
it could write the runner's memory. A runner made to misbehave (patched by a hostile tool
module at import, as code holding its socket could) sends a reply over the call's output cap
(48 MiB, a frame the host does not read; or 1 KiB over, within the frame's overhead), or one
for another call, or floods the call with more events than a call may send: the host
refuses each, and the victim's calls go on. Tool code writing garbage to its events pipe
costs it its events, never its answer.
"""

from __future__ import annotations

import textwrap

import pytest

from tests.security.conftest import SandboxedGateway

pytestmark = pytest.mark.anyio

REACH_THE_RUNNER = textwrap.dedent(
    """
    import ctypes, errno, os
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    runner = os.getppid()

    def syscall(number, *args):
        ctypes.set_errno(0)
        done = libc.syscall(ctypes.c_long(number), *[ctypes.c_long(a) for a in args])
        return done, ("ok" if done >= 0 else errno.errorcode[ctypes.get_errno()])

    seen = {}
    pidfd, seen["pidfd_open"] = syscall(434, runner, 0)
    taken = []
    for fd in range(3, 32):  # the runner's socket to the host is one of these
        got, seen["pidfd_getfd"] = syscall(438, max(pidfd, 0), fd, 0)
        if got >= 0:
            taken.append(fd)
    seen["taken"] = taken
    _, seen["process_vm_writev"] = syscall(311, runner, 0, 0, 0, 0, 0)
    _, seen["process_vm_readv"] = syscall(310, runner, 0, 0, 0, 0, 0)
    _, seen["ptrace_attach"] = syscall(101, 16, runner, 0, 0)
    params = ctypes.create_string_buffer(120)
    _, seen["io_uring_setup"] = syscall(425, 4, ctypes.addressof(params))
    try:
        with open(f"/proc/{runner}/mem", "r+b", buffering=0):
            seen["proc_mem"] = "ok"
    except OSError as exc:
        seen["proc_mem"] = errno.errorcode[exc.errno]
    seen
    """
)
DENIED = {"EPERM", "ENOSYS"}


async def _call(
    gateway: SandboxedGateway, tool: str, tenant: str, arguments: dict[str, object]
) -> tuple[int, dict[str, object]]:
    answer = await gateway.client.post(
        f"/v1/tools/{tool}/call",
        json={"arguments": arguments},
        headers=gateway.bearer(tenant, "agent"),
    )
    body = answer.json()
    assert isinstance(body, dict)
    return answer.status_code, body


async def _victim_echoes(gateway: SandboxedGateway) -> None:
    status, body = await _call(gateway, "echo", "acme", {"message": "still here"})
    assert status == 200, body
    assert "still here" in str(body)


async def test_tool_code_cannot_reach_its_runner(sandboxed_gateway: SandboxedGateway) -> None:
    status, body = await _call(sandboxed_gateway, "run_python", "evil", {"code": REACH_THE_RUNNER})
    assert status == 200, body
    seen = body["result"]["return_value"]  # type: ignore[index]
    assert seen["taken"] == [], seen
    for call in ("pidfd_open", "pidfd_getfd", "process_vm_writev", "process_vm_readv"):
        assert seen[call] in DENIED, (call, seen)
    assert seen["ptrace_attach"] in DENIED, seen
    assert seen["io_uring_setup"] in DENIED, seen
    assert seen["proc_mem"] in {"EACCES", "EPERM"}, seen
    await _victim_echoes(sandboxed_gateway)


@pytest.mark.parametrize("tool", ["oversized_reply", "barely_oversized_reply"])
async def test_a_reply_over_the_output_cap_is_refused_by_the_host(
    sandboxed_gateway: SandboxedGateway, tool: str
) -> None:
    status, body = await _call(sandboxed_gateway, tool, "evil", {})
    assert (status, body["code"]) == (507, "SANDBOX_OUTPUT_LIMIT"), str(body)[:500]
    assert body["details"]["max_output_bytes"] == 1 << 20  # type: ignore[index]
    assert len(str(body)) < 4096  # nothing of the result was passed on
    await _victim_echoes(sandboxed_gateway)
    # The attacker's own next call runs in a fresh sandbox.
    status, body = await _call(sandboxed_gateway, "echo", "evil", {"message": "again"})
    assert status == 200, body


async def test_a_reply_for_another_call_is_refused_and_the_sandbox_torn_down(
    sandboxed_gateway: SandboxedGateway,
) -> None:
    status, first = await _call(sandboxed_gateway, "misaddressed_reply", "evil", {})
    assert first["code"] == "SANDBOX_KILLED", first
    assert first["details"]["protocol_violation"] == "reply id"  # type: ignore[index]
    assert "not yours" not in str(first)
    status, again = await _call(sandboxed_gateway, "echo", "evil", {"message": "again"})
    assert status == 200, again
    await _victim_echoes(sandboxed_gateway)


async def test_a_runner_flooding_a_call_with_events_is_torn_down(
    sandboxed_gateway: SandboxedGateway,
) -> None:
    status, first = await _call(sandboxed_gateway, "flood_events", "evil", {})
    assert first["code"] == "SANDBOX_KILLED", first
    assert first["details"]["protocol_violation"] == "events"  # type: ignore[index]
    status, again = await _call(sandboxed_gateway, "echo", "evil", {"message": "again"})
    assert status == 200, again
    await _victim_echoes(sandboxed_gateway)


async def test_garbage_on_the_events_pipe_costs_the_tool_its_events_not_its_answer(
    sandboxed_gateway: SandboxedGateway,
) -> None:
    status, body = await _call(sandboxed_gateway, "garbage_events", "evil", {"megabytes": 64})
    assert status == 200, body
    assert body["result"] == "still answered"
    await _victim_echoes(sandboxed_gateway)

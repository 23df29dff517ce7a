"""The runner's loop: imports the tool modules once, then runs each call in a forked child.

It connects to the host's Unix socket (in the sandbox workspace) and says hello, having
imported the standard library and its own package only; then it imports the tool modules and
says which failed (the loaded frame, `runner_wire`), and answers framed requests one at a
time (`frames`). Per call it hands the request to a child forked
ahead of time, in its own process group with the call's rlimits, and supervises it
(`call_supervision`) until its result, its death, the wall-clock deadline, the output cap or
the host's cancel; the reply carries the outcome the runner decided (`call_outcomes`). A
request of type "mcp" or "watch" goes to the MCP stdio relay (`stdio_relay`).

Cancel: while a call runs, the runner also watches the host's socket. A frame
`{"type": "cancel", "id": <the call's id>}` (or the host closing the connection) kills the
call's process group at once, as the wall-clock limit does, and the call is answered with
CANCELLED; the sandbox stays warm. A cancel that arrives after its call was answered is
dropped unanswered.

The runner is a boundary against the tool: it makes itself non-dumpable before it forks any
child, so tool code (same user, no capabilities) can neither ptrace it, read or write its
memory through /proc/<pid>/mem, nor take its socket to the host with `pidfd_getfd`; the
sandbox's seccomp filter denies those calls too. Signals, which tool code of the runner's uid
may send, a filter every child installs shuts (`runner_guard`). Each reply carries its
request's id, and the host checks it and the call's output cap itself (`runner_wire`).

Tool code is reached through its `@tool` declaration when the `tools` package is importable
(`tools.tool_declaration`, standard library only: a tool of plain arguments is called without
pydantic, one that declares a model has it built here at its first call, and a `ToolContext`
injected), else as a plain `module:function`. A registered tool's
return value goes back as MCP content in the reply's `runner_wire.OUTPUT` field (the tool's
`output_of` builds it, so an image it returns stays an image block; the host checks it with
`tools.ToolResult.from_wire`); a plain function's goes back as it is, in `result`.
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import json
import os
import socket
import sys
import time
import types
from typing import TYPE_CHECKING, Any

from . import runner_wire as wire
from .call_outcomes import OUT_OF_MEMORY, OUTPUT, call_error, exception_of, reply
from .call_supervision import (
    CHILD_EXITS,
    LIBC,
    PR_SET_CHILD_SUBREAPER,
    PR_SET_DUMPABLE,
    RESULT_HEADER,
    apply_limits,
    kill_group,
    supervise,
    sweep_orphans,
)
from .egress_forwarder import PROXY_VARIABLES, start_egress_forwarder
from .frames import (
    EventRelay,
    HostEvents,
    HostWatch,
    event_writer,
    read_all,
    recv_frame,
    send_frame,
    write_all,
)
from .runner_guard import guard_program, install_guard

if TYPE_CHECKING:
    from .stdio_relay import StdioRelay


def _vm_size_bytes() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    return 0


class Runner:
    def __init__(self, workspace: str, preloaded: frozenset[str] = frozenset()) -> None:
        self.workspace = workspace
        self._preloaded = preloaded
        self.import_errors: dict[str, str] = {}
        self.baseline_vm = 0
        self._resolved: dict[str, Any] = {}
        # (pid, request fd, result fd, events fd) of the child forked for the next call
        self._spare: tuple[int, int, int, int] | None = None
        self.host_fd: int | None = None
        self.host: socket.socket | None = None  # watched for a cancel while a call runs
        self.egress_port: int | None = None  # the forwarder's port on 127.0.0.1
        self.forwarder_pid = 0
        self._unreaped, self._child_pid = False, 0
        # What each child installs before tool code runs: no signal reaches this runner.
        self.guard = guard_program(os.getpid(), os.getpgrp())
        self._stdio: StdioRelay | None = None  # mcp_stdio servers, from the first MCP request

    @property
    def stdio(self) -> StdioRelay:
        """The MCP stdio relay, imported at the first request for it: not a start's cost."""
        if self._stdio is None:
            from .stdio_relay import StdioRelay

            self._stdio = StdioRelay(self.workspace, self.guard)
        return self._stdio

    def hello(self) -> dict[str, Any]:
        """Ready: the runner is up, on the standard library alone (`imported` names what
        else it had imported by then, its own package aside: nothing)."""
        return {
            "type": wire.HELLO,
            "pid": os.getpid(),
            "uid": os.getuid(),
            "python": sys.version.split()[0],
            "egress_port": self.egress_port,
            "imported": _imported_beyond_stdlib(self._preloaded),
            "cpu_ms": time.process_time() * 1000,  # its start's CPU, the interpreter's included
        }

    def load(self, modules: list[str]) -> dict[str, Any]:
        """Import the tool modules, after the hello: what they import (pydantic, the tools'
        own dependencies) is theirs, not the runner's start. The answer lists their tools
        and the modules that failed (the host then refuses the sandbox)."""
        for name in modules:
            try:
                importlib.import_module(name)
            except Exception as exc:  # reported in the answer, the host refuses the sandbox
                self.import_errors[name] = f"{type(exc).__name__}: {exc}"
        # The child's address-space limit sits on top of what the runner already maps.
        self.baseline_vm = _vm_size_bytes()
        # Children share the imported modules' pages; keep the collector from dirtying them.
        gc.freeze()
        declared = sys.modules.get("tools.tool_declaration")
        tools = {d.name for d in declared.DECLARED} if declared is not None else set()
        registry = getattr(sys.modules.get("tools.registry"), "default_registry", None)
        tools.update(t.name for t in registry or ())
        return {
            "type": wire.LOADED,
            "tools": sorted(tools),
            "import_errors": self.import_errors,
            # What the tool modules imported beyond the standard library (the built-in
            # tools: nothing; pydantic comes with a tool module that imports it).
            "tool_imports": _imported_beyond_stdlib(
                self._preloaded, {name.partition(".")[0] for name in modules}
            ),
            "baseline_vm_kb": self.baseline_vm // 1024,
            "cpu_ms": time.process_time() * 1000,  # since it started, the imports included
        }

    def _resolve(self, tool: str, entrypoint: str) -> Any:
        """The declared or registered tool (so arguments are validated and context injected),
        else the bare function the entrypoint names."""
        if entrypoint in self._resolved:
            return self._resolved[entrypoint]
        registered = _registered(tool, entrypoint)
        if registered is None:
            module_name, _, qualname = entrypoint.partition(":")
            target: Any = importlib.import_module(module_name)
            for part in qualname.split("."):
                target = getattr(target, part)
            # Importing the module may have declared it (and the registry itself).
            registered = _registered(tool, entrypoint) or target
        self._resolved[entrypoint] = registered
        return registered

    def _warm(self, target: Any) -> None:
        """Build, here, what the tool's calls need beyond the standard library (pydantic's
        model of its arguments, for a tool that declares one): paid at its first call, once,
        and inherited by every child forked after. A spare forked before it goes."""
        declared = sys.modules.get("tools.tool_declaration")
        if declared is None or not hasattr(target, "invoke"):
            return
        loaded = len(sys.modules)
        declared.warm_tool(target)
        if len(sys.modules) != loaded and self._spare is not None:
            pid, request_write, result_read, events_read = self._spare
            self._spare = None
            os.close(request_write)  # it reads nothing and exits
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)
            os.close(result_read)
            os.close(events_read)

    def prepare(self) -> None:
        """Fork the next call's child ahead of time, off the next call's critical path."""
        if self._spare is None:
            self._spare = self._fork_spare()

    def _fork_spare(self) -> tuple[int, int, int, int]:
        request_read, request_write = os.pipe()
        result_read, result_write = os.pipe()
        events_read, events_write = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child never returns
            os.close(request_write)
            os.close(result_read)
            os.close(events_read)
            self._child(request_read, result_write, events_write)
        os.close(request_read)
        os.close(result_write)
        os.close(events_write)
        os.setpgid(pid, pid)  # also done by the child: whichever runs first
        return pid, request_write, result_read, events_read

    def _forward(self, request: dict[str, Any]) -> Any:
        """What sends the host an event of `request`'s call (nothing without a host)."""
        return HostEvents(self.host, request.get("id")).forward

    def _watch(self, request: dict[str, Any]) -> HostWatch | None:
        return None if self.host is None else HostWatch(self.host, request.get("id"))

    def handle(self, request: dict[str, Any]) -> dict[str, Any]:
        if request.get("type") == wire.MCP:
            return self.stdio.relay(request, self.host, self._watch(request))
        if request.get("type") == wire.WATCH:
            return self.stdio.watch_servers(request, self.host, self._watch(request))
        limits = request["limits"]
        try:
            target = self._resolve(request["tool"], request["entrypoint"])
        except Exception as exc:
            return reply(request, "error", error=call_error("TOOL_NOT_FOUND", exc))
        # A model that cannot be built fails the same way in the call's child, which says why.
        with contextlib.suppress(Exception):
            self._warm(target)
        pid, request_write, result_read, events_read = self._spare or self._fork_spare()
        self._spare = None
        started = time.monotonic()
        try:
            write_all(request_write, json.dumps(request).encode())
        except OSError:
            pass  # the child is gone: its exit status tells what happened
        finally:
            os.close(request_write)
        watch = self._watch(request)
        events = EventRelay(events_read, self._forward(request))
        try:
            outcome, self._unreaped = supervise(pid, result_read, started, limits, watch, events)
        finally:
            events.close()
        self._child_pid = pid
        return reply(request, outcome.pop("reason"), **outcome)

    def finish(self) -> None:
        """After the reply: reap the call's child, kill what it left, fork the next one."""
        if self._unreaped:
            kill_group(self._child_pid)
            with contextlib.suppress(ChildProcessError):
                os.waitpid(self._child_pid, 0)
            self._unreaped = False
        # An MCP relay leaves the spare child forked before it; servers stay warm.
        keep = {self.forwarder_pid, *(self._stdio.pids() if self._stdio is not None else ())}
        if self._spare is not None:
            keep.add(self._spare[0])
        sweep_orphans(keep=keep)
        self.prepare()

    def _child(self, request_read: int, result_write: int, events_write: int) -> None:
        me = os.getpid()
        body: dict[str, Any]
        try:
            if self.host_fd is not None:
                os.close(self.host_fd)  # only the runner talks to the host
            CHILD_EXITS.uninstall_in_child()
            # The runner is not dumpable (so the tool cannot reach its memory); the tool's
            # own process is an ordinary one (its /proc entries its own).
            LIBC.prctl(PR_SET_DUMPABLE, 1, 0, 0, 0)
            os.setpgid(0, 0)
            install_guard(self.guard)  # after leaving the runner's group, before tool code
            _quiet_stdio()
            os.chdir(self.workspace)
            raw = read_all(request_read)
            if not raw:  # the runner went away before handing over a call
                os._exit(0)
            request = json.loads(raw)
            # The call's W3C trace context, for tool code (and what it starts) to continue.
            traceparent = (request.get("context") or {}).get("traceparent")
            if traceparent:
                os.environ["TRACEPARENT"] = traceparent
            if request.get("egress") and self.egress_port is not None:
                proxy = f"http://127.0.0.1:{self.egress_port}"
                os.environ.update(dict.fromkeys(PROXY_VARIABLES, proxy))
                for name in ("NO_PROXY", "no_proxy"):
                    os.environ.pop(name, None)
            apply_limits(request["limits"], self.baseline_vm)
            target = self._resolve(request["tool"], request["entrypoint"])
            value = self._invoke(target, request, events_write)
            output_of = getattr(target, "output_of", None)
            body = (
                {"ok": True, OUTPUT: output_of(value)}
                if output_of
                else {"ok": True, "result": value}
            )
        except MemoryError:  # nothing to spare for building a report
            body = {"ok": False, "error": {"mro": ["MemoryError"], "message": "out of memory"}}
        except BaseException as exc:
            if os.getpid() != me:  # a process the tool forked: it reports nothing
                os._exit(0)
            body = {"ok": False, "error": exception_of(exc)}
        if os.getpid() != me:
            os._exit(0)
        try:
            data = json.dumps(body, separators=(",", ":")).encode()
        except MemoryError:
            data = OUT_OF_MEMORY
        except BaseException as exc:  # a result that is not JSON
            data = json.dumps({"ok": False, "error": exception_of(exc)}).encode()
        try:
            write_all(result_write, RESULT_HEADER.pack(len(data)) + data)
        finally:
            os._exit(0)

    def _invoke(self, target: Any, request: dict[str, Any], events_write: int) -> Any:
        arguments = request.get("arguments") or {}
        if hasattr(target, "invoke"):  # declared or registered: `tools` is loaded
            call_tool = sys.modules["tools.tool_declaration"].call_tool
            report = event_writer(events_write)  # progress and logs, to the runner
            result = call_tool(target, arguments, request.get("context"), report)
        else:
            result = target(**arguments)
        if isinstance(result, types.CoroutineType):
            import asyncio  # only an async tool's call pays for it

            result = asyncio.run(result)
        return result


_USAGE = "--connect <the host's Unix socket> [--workspace <dir>] [--module <tool module>]..."


class _Arguments:
    """The runner's command line, read by hand: argparse (and the `re` it imports) would be a
    sixth of the runner's start."""

    def __init__(self) -> None:
        self.connect = ""
        self.workspace = os.getcwd()
        self.module: list[str] = []

    @classmethod
    def parse(cls, argv: list[str]) -> _Arguments | None:
        """The arguments, or None when they are not what `_USAGE` says."""
        args = cls()
        if len(argv) % 2:
            return None
        for option, value in zip(argv[::2], argv[1::2], strict=True):
            if option == "--connect":
                args.connect = value
            elif option == "--workspace":
                args.workspace = value
            elif option == "--module":
                args.module.append(value)
            else:
                return None
        return args if args.connect else None


def _registered(tool: str, entrypoint: str) -> Any:
    """`entrypoint`'s tool as `@tool` declared it, or as the default registry holds it (a
    tool added there built), when the `tools` package is loaded; else None."""
    declared = sys.modules.get("tools.tool_declaration")
    found = declared.declared_at(entrypoint) if declared is not None else None
    registry = getattr(sys.modules.get("tools.registry"), "default_registry", None)
    if found is None and registry is not None:
        found = registry.get(tool)
    return found if found is not None and found.entrypoint == entrypoint else None


def _imported_beyond_stdlib(preloaded: frozenset[str], also: set[str] | None = None) -> list[str]:
    """The top-level modules the runner's start imported that are neither the standard
    library's nor the runner's own package (nor those of `also`: the tool modules)."""
    own = {__name__.partition(".")[0], *(also or ())}
    tops = {name.partition(".")[0] for name in sys.modules.keys() - preloaded}
    return sorted(top for top in tops - own if top not in sys.stdlib_module_names)


def _quiet_stdio() -> None:
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)


def main(argv: list[str] | None = None, preloaded: frozenset[str] = frozenset()) -> int:
    """Run the runner; `preloaded`: the modules the interpreter had before its first line."""
    args = _Arguments.parse(sys.argv[1:] if argv is None else argv)
    if args is None:
        print(f"usage: runner {_USAGE}", file=sys.stderr)
        return 2
    # Not dumpable: no process of the sandbox's user (the tool's) may read or write the
    # runner's memory (/proc/<pid>/mem), ptrace it or take its descriptors (pidfd_getfd).
    if LIBC.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
        print("runner: cannot make itself non-dumpable; refusing to run", file=sys.stderr)
        return 1
    LIBC.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    forwarder = start_egress_forwarder(args.workspace)
    runner = Runner(args.workspace, preloaded)
    CHILD_EXITS.install()  # before the first call's child is forked
    if forwarder is not None:
        runner.forwarder_pid, runner.egress_port = forwarder
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(args.connect)
    runner.host_fd, runner.host = sock.fileno(), sock
    try:
        send_frame(sock, runner.hello())
        send_frame(sock, runner.load(args.module))
        runner.prepare()
        while (request := recv_frame(sock)) is not None:
            if request.get("type") in (wire.CANCEL, wire.SERVER_ANSWER):
                continue  # its call was answered before it arrived
            send_frame(sock, runner.handle(request))
            runner.finish()
    except (ConnectionResetError, BrokenPipeError):
        pass  # the host went away (it closes a killed call's sandbox with our answer unread)
    sweep_orphans()
    return 0

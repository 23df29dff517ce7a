"""The in-sandbox runner: imports the tool modules once, then runs each call in a forked child.

Standard library only (Python 3.11+): it runs inside every sandbox, whatever the backend. It
connects to the host's Unix socket (in the sandbox workspace), says hello, then answers
framed JSON requests one at a time. Per call it forks a child in its own process group with
the call's rlimits (address space on top of the runner's own, CPU seconds, file size and, for
an unprivileged user, process count), kills the whole group at the wall-clock deadline, reads
at most `max_output_bytes` of result, and reports usage (wall ms, CPU ms, peak RSS, exit
reason). It is the processes' subreaper, so a detached (setsid) child cannot outlive its call.

Cancel: while a call runs, the runner also watches the host's socket. A frame
`{"type": "cancel", "id": <the call's id>}` (or the host closing the connection) kills the
call's process group at once, as the wall-clock limit does, and the call is answered with
CANCELLED; the sandbox stays warm. A cancel that arrives after its call was answered is
dropped unanswered.

The child runs tool code, and tool code can write to the child's result pipe itself: what
comes through it is a claim. So the runner alone measures usage (its own clock, the child's
/proc entries or `wait4`) and decides the exit reason and the code; from the child's payload
it takes only a result, or a tool's exception (type names, message, a `ToolArgumentsError`'s
hints, the traceback from the tool's side, which the gateway shows to the tools' author
alone). Any code, usage or other field the payload carries is ignored.

Egress: the sandbox has no network but loopback. At start the runner listens on 127.0.0.1
and forks one forwarder process that relays each connection made there to the gateway's
egress proxy (the Unix socket `.conclave-egress.sock` in the workspace). A call whose tool
has a network allow-list (the request's `egress`) gets HTTP_PROXY and HTTPS_PROXY pointing
at it; the gateway decides what each connection may reach.

MCP servers (`mcp_stdio` sources): a request of type "mcp" carries a server's command and
one JSON-RPC message. The runner starts the server on first use as a long-lived child in its
own process group (stdin/stdout pipes), does `initialize` once, relays the message and
answers with the server's response, all within the call's wall-clock limit; at the limit, on
non-JSON output, on a line longer than the output cap or when the server exits, it kills the
server's process group and the next call starts it again. The server lives as long as the
sandbox. A cancel while the server works on a call is passed on to it as
`notifications/cancelled` for that request; the server keeps running for the next call.
The server is initialized with the client capabilities the request's spec names (the calling
client's: sampling, elicitation, roots), and started again when a call names others. Its
requests to the client (`wire.CLIENT_METHODS`) go to the host as server-request frames and
the host's answers back to it under its own id; `ping` is answered here, anything else, or
more than `wire.MAX_PENDING_REQUESTS` waiting at once, is refused to it (-32601).
Subscriptions: the runner remembers the URIs a server was subscribed to (`resources/subscribe`
relayed and answered) and subscribes a server it started again to them, so a restart (a
crash, or other client capabilities) keeps them. What a server notifies of them
(`wire.NOTICE_METHODS`) goes to the host as a notice frame: during a call, or while the host
watches the idle sandbox (a request of type "watch", answered when the host cancels it).

The runner is a boundary against the tool: it makes itself non-dumpable before it forks any
child, so tool code (same user, no capabilities) can neither ptrace it, read or write its
memory through /proc/<pid>/mem, nor take its socket to the host with `pidfd_getfd`; the
sandbox's seccomp filter denies those calls too. Each reply carries its request's id, and
the host checks it and the call's output cap itself (`runner_wire`).

Frames: `runner_wire` (4-byte big-endian length, then UTF-8 JSON). Tool code is reached
through the tool registry when the `tools` package is importable (so the `ToolContext` is
injected), else as a plain `module:function`. A registered tool's return value goes back as
MCP content in the reply's `wire.OUTPUT` field (the tool's `output_of` builds it, so an image
it returns stays an image block; the host checks it with `tools.ToolResult.from_wire`); a
plain function's goes back as it is, in `result`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ctypes
import gc
import importlib
import json
import math
import os
import resource
import select
import signal
import socket
import struct
import sys
import threading
import time
import traceback
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sandbox import runner_wire as wire
else:
    try:
        import runner_wire as wire  # mounted beside this script in the sandbox
    except ImportError:  # imported as `sandbox.runner` on the host
        from sandbox import runner_wire as wire

MAX_FRAME = 64 * 1024 * 1024  # what the host may send (it is trusted); replies are capped
FILE_SIZE_LIMIT = 1024 * 1024 * 1024  # a call may write at most 1 GiB per file
PR_SET_CHILD_SUBREAPER = 36
PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4
_PROXY_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy")
_HEADER = wire.HEADER
_RESULT = struct.Struct(">Q")  # a child's result: its length, then the JSON
_OUT_OF_MEMORY = b'{"ok":false,"error":{"mro":["MemoryError"],"message":"out of memory"}}'
_CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
_LIBC = ctypes.CDLL(None, use_errno=True)
OUTPUT = wire.OUTPUT


def send_frame(sock: socket.socket, message: dict[str, Any]) -> None:
    data = json.dumps(message, separators=(",", ":")).encode()
    sock.sendall(_HEADER.pack(len(data)) + data)


def recv_frame(sock: socket.socket) -> dict[str, Any] | None:
    header = _recv_exactly(sock, _HEADER.size)
    if header is None:
        return None
    (size,) = _HEADER.unpack(header)
    if size > MAX_FRAME:
        raise ValueError(f"frame of {size} bytes exceeds {MAX_FRAME}")
    body = _recv_exactly(sock, size)
    return None if body is None else dict(json.loads(body))


def _recv_exactly(sock: socket.socket, size: int) -> bytes | None:
    chunks, got = [], 0
    while got < size:
        chunk = sock.recv(size - got)
        if not chunk:
            return None
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _read_all(fd: int) -> bytes:
    chunks = []
    while chunk := os.read(fd, 1 << 16):
        chunks.append(chunk)
    os.close(fd)
    return b"".join(chunks)


def _vm_size_bytes() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    return 0


class Runner:
    def __init__(self, modules: list[str], workspace: str) -> None:
        self.workspace = workspace
        self.import_errors: dict[str, str] = {}
        for name in modules:
            try:
                importlib.import_module(name)
            except Exception as exc:  # reported in the hello, the host refuses the sandbox
                self.import_errors[name] = f"{type(exc).__name__}: {exc}"
        self._registry = getattr(sys.modules.get("tools.registry"), "default_registry", None)
        self._context_model = getattr(sys.modules.get("protocol.tools"), "ToolContext", None)
        # The child's address-space limit sits on top of what the runner already maps.
        self.baseline_vm = _vm_size_bytes()
        self._resolved: dict[str, Any] = {}
        # (pid, request fd, result fd, events fd) of the child forked for the next call
        self._spare: tuple[int, int, int, int] | None = None
        self.host_fd: int | None = None
        self.host: socket.socket | None = None  # watched for a cancel while a call runs
        self.egress_port: int | None = None  # the forwarder's port on 127.0.0.1
        self.forwarder_pid = 0
        self._unreaped, self._child_pid = False, 0
        self._servers: dict[str, _McpServer] = {}  # mcp_stdio servers, by source name
        self._subscribed: dict[str, set[str]] = {}  # by source name: URIs it is subscribed to
        # Children share the imported modules' pages; keep the collector from dirtying them.
        gc.freeze()

    def hello(self) -> dict[str, Any]:
        tools = [t.name for t in self._registry] if self._registry is not None else []
        return {
            "type": wire.HELLO,
            "pid": os.getpid(),
            "uid": os.getuid(),
            "python": sys.version.split()[0],
            "tools": tools,
            "import_errors": self.import_errors,
            "baseline_vm_kb": self.baseline_vm // 1024,
            "egress_port": self.egress_port,
        }

    def _resolve(self, tool: str, entrypoint: str) -> Any:
        """The registered tool (so arguments are validated and context injected), else the
        bare function the entrypoint names."""
        if entrypoint in self._resolved:
            return self._resolved[entrypoint]
        registered = self._registry.get(tool) if self._registry is not None else None
        if registered is None or registered.entrypoint != entrypoint:
            module_name, _, qualname = entrypoint.partition(":")
            target: Any = importlib.import_module(module_name)
            for part in qualname.split("."):
                target = getattr(target, part)
            # Importing the module may have registered it (and the registry itself).
            self._registry = getattr(sys.modules.get("tools.registry"), "default_registry", None)
            self._context_model = getattr(sys.modules.get("protocol.tools"), "ToolContext", None)
            registered = self._registry.get(tool) if self._registry is not None else None
            if registered is None or registered.entrypoint != entrypoint:
                registered = target
        self._resolved[entrypoint] = registered
        return registered

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
        return _HostEvents(self.host, request.get("id")).forward

    def _watch(self, request: dict[str, Any]) -> _HostWatch | None:
        return None if self.host is None else _HostWatch(self.host, request.get("id"))

    def handle(self, request: dict[str, Any]) -> dict[str, Any]:
        if request.get("type") == wire.MCP:
            return self._relay_mcp(request)
        if request.get("type") == wire.WATCH:
            return self._watch_servers(request)
        limits = request["limits"]
        try:
            self._resolve(request["tool"], request["entrypoint"])
        except Exception as exc:
            return _reply(request, "error", error=_err("TOOL_NOT_FOUND", exc))
        pid, request_write, result_read, events_read = self._spare or self._fork_spare()
        self._spare = None
        started = time.monotonic()
        try:
            _write_all(request_write, json.dumps(request).encode())
        except OSError:
            pass  # the child is gone: its exit status tells what happened
        finally:
            os.close(request_write)
        watch = self._watch(request)
        events = _EventRelay(events_read, self._forward(request))
        try:
            outcome, self._unreaped = _supervise(pid, result_read, started, limits, watch, events)
        finally:
            events.close()
        self._child_pid = pid
        return _reply(request, outcome.pop("reason"), **outcome)

    def finish(self) -> None:
        """After the reply: reap the call's child, kill what it left, fork the next one."""
        if self._unreaped:
            _kill_group(self._child_pid)
            with contextlib.suppress(ChildProcessError):
                os.waitpid(self._child_pid, 0)
            self._unreaped = False
        # An MCP relay leaves the spare child forked before it; servers stay warm.
        keep = {self.forwarder_pid, *(server.pid for server in self._servers.values())}
        if self._spare is not None:
            keep.add(self._spare[0])
        _sweep_orphans(keep=keep)
        self.prepare()

    def _relay_mcp(self, request: dict[str, Any]) -> dict[str, Any]:
        """Relay one JSON-RPC message to the request's MCP server (started if it is not)."""
        started = time.monotonic()
        limits = request["limits"]
        deadline = started + int(limits["timeout_ms"]) / 1000
        spec = request["arguments"]
        name = str(spec["source"])
        server = self._servers.get(name)
        asked = spec.get("capabilities")  # None: whatever the running server declared
        try:
            if server is not None and asked is not None and server.capabilities != asked:
                server.kill()  # it told the server other capabilities than this caller has
                server = None
            fresh = server is None or not server.alive()
            if server is None or not server.alive():
                if server is not None:
                    server.kill()
                server = self._servers[name] = _McpServer.start(spec, self.workspace)
                server.capabilities = asked if isinstance(asked, dict) else {}
            before = server.cpu_ms()
            cap = int(limits["max_output_bytes"])
            server.initialize(deadline, cap)
            to_host = _HostEvents(self.host, request.get("id"))
            if fresh:
                server.resubscribe(self._subscribed.get(name, set()), deadline, cap)
            message = spec["message"]
            if message["method"] == "initialize":  # the gateway asks what the server is
                answer: dict[str, Any] = {"result": server.initialized}
            else:
                answer = server.request(
                    message,
                    deadline,
                    cap,
                    watch=self._watch(request),
                    on_event=to_host.forward,
                    on_request=to_host.ask,
                    on_notice=to_host.notice,
                )
                if "result" in answer:
                    self._remember(name, message)
        except _CallCancelled:
            usage = {"wall_ms": (time.monotonic() - started) * 1000, "cpu_ms": 0.0}
            error = _err("CANCELLED", f"mcp_stdio source {name!r}: the call was cancelled")
            return _reply(request, "cancelled", usage=usage, error=error)
        except _McpFault as fault:
            if server is not None:
                server.kill()
            self._servers.pop(name, None)
            usage = {"wall_ms": (time.monotonic() - started) * 1000, "cpu_ms": 0.0}
            return _reply(request, fault.reason, usage=usage, error=fault.error)
        usage = {
            "wall_ms": (time.monotonic() - started) * 1000,
            "cpu_ms": max(0.0, server.cpu_ms() - before),
            "peak_rss_kb": server.peak_rss_kb(),
        }
        if "error" in answer:
            return _reply(request, "error", usage=usage, error=_rpc_error(name, answer["error"]))
        return _reply(request, "ok", usage=usage, result=answer.get("result"))

    def _remember(self, source: str, message: dict[str, Any]) -> None:
        """Keep the URIs the source's server is subscribed to (after its answer said so)."""
        method, params = message.get("method"), message.get("params")
        uri = params.get("uri") if isinstance(params, dict) else None
        if method not in wire.SUBSCRIBE_METHODS or not isinstance(uri, str):
            return
        subscribed = self._subscribed.setdefault(source, set())
        if method == wire.SUBSCRIBE_METHODS[0]:
            if len(subscribed) < _MAX_SUBSCRIBED:
                subscribed.add(uri)
        else:
            subscribed.discard(uri)

    def _watch_servers(self, request: dict[str, Any]) -> dict[str, Any]:
        """Forward the servers' notices to the host until it cancels the watch (or goes)."""
        started = time.monotonic()
        watch = self._watch(request)
        if watch is None:
            return _reply(request, "ok", usage={"wall_ms": 0.0, "cpu_ms": 0.0})
        to_host = _HostEvents(self.host, request.get("id"))
        while True:
            servers = {s.process.stdout.fileno(): s for s in self._servers.values() if s.alive()}
            ready, _, _ = select.select([watch.fd, *servers], [], [])
            if watch.fd in ready and watch.cancels():
                break
            for fd in ready:
                server = servers.get(fd)
                if server is not None and not server.drain_idle(to_host.notice):
                    server.kill()  # gone, or wrote what no client takes: the next call restarts it
                    self._servers.pop(server.source, None)
        usage = {"wall_ms": (time.monotonic() - started) * 1000, "cpu_ms": 0.0}
        return _reply(request, "ok", usage=usage)

    def _child(self, request_read: int, result_write: int, events_write: int) -> None:
        me = os.getpid()
        body: dict[str, Any]
        try:
            if self.host_fd is not None:
                os.close(self.host_fd)  # only the runner talks to the host
            _CHILD_EXITS.uninstall_in_child()
            # The runner is not dumpable (so the tool cannot reach its memory); the tool's
            # own process is an ordinary one (its /proc entries its own).
            _LIBC.prctl(PR_SET_DUMPABLE, 1, 0, 0, 0)
            os.setpgid(0, 0)
            _quiet_stdio()
            os.chdir(self.workspace)
            raw = _read_all(request_read)
            if not raw:  # the runner went away before handing over a call
                os._exit(0)
            request = json.loads(raw)
            # The call's W3C trace context, for tool code (and what it starts) to continue.
            traceparent = (request.get("context") or {}).get("traceparent")
            if traceparent:
                os.environ["TRACEPARENT"] = traceparent
            if request.get("egress") and self.egress_port is not None:
                proxy = f"http://127.0.0.1:{self.egress_port}"
                os.environ.update(dict.fromkeys(_PROXY_VARIABLES, proxy))
                for name in ("NO_PROXY", "no_proxy"):
                    os.environ.pop(name, None)
            _apply_limits(request["limits"], self.baseline_vm)
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
            body = {"ok": False, "error": _exception_of(exc)}
        if os.getpid() != me:
            os._exit(0)
        try:
            data = json.dumps(body, separators=(",", ":")).encode()
        except MemoryError:
            data = _OUT_OF_MEMORY
        except BaseException as exc:  # a result that is not JSON
            data = json.dumps({"ok": False, "error": _exception_of(exc)}).encode()
        try:
            _write_all(result_write, _RESULT.pack(len(data)) + data)
        finally:
            os._exit(0)

    def _invoke(self, target: Any, request: dict[str, Any], events_write: int) -> Any:
        arguments = request.get("arguments") or {}
        if hasattr(target, "invoke"):
            context = request.get("context")
            if context is not None and self._context_model is not None:
                context = self._context_model.model_validate(context)
                if hasattr(context, "reporting_to"):  # progress and logs, to the runner
                    context = context.reporting_to(_event_writer(events_write))
            result = target.invoke(arguments, context)
        else:
            result = target(**arguments)
        if asyncio.iscoroutine(result):
            result = asyncio.run(result)
        return result


def _event_writer(fd: int) -> Any:
    """What the tool's context reports to: each event framed on the call's events pipe (an
    event longer than the wire allows is not sent)."""

    def report(event: Any) -> None:
        data = json.dumps(event.model_dump(mode="json"), separators=(",", ":")).encode()
        if len(data) <= wire.EVENT_LIMIT:
            _write_all(fd, _HEADER.pack(len(data)) + data)

    return report


_DRAIN_CHUNKS = 16  # 1 MiB of events read per look at the pipe


class _EventRelay:
    """The call's events pipe: its frames forwarded to the host as they come. Tool code can
    write there itself: a frame over `EVENT_LIMIT` or not JSON ends the relay for the call
    (what follows is read and dropped, so the tool never blocks on a full pipe)."""

    def __init__(self, fd: int, forward: Any) -> None:
        self.fd = fd
        self._forward = forward
        self._buffer = bytearray()
        self._broken = False
        os.set_blocking(fd, False)

    def drain(self) -> None:
        """Read what the pipe holds now (at most `_DRAIN_CHUNKS` reads, so a tool writing
        without end cannot keep the runner from its deadline) and forward its events."""
        for _ in range(_DRAIN_CHUNKS):
            if not (chunk := _read_some(self.fd)):
                return
            if self._broken:
                continue
            self._buffer += chunk
            while len(self._buffer) >= _HEADER.size:
                (size,) = _HEADER.unpack_from(self._buffer)
                if size > wire.EVENT_LIMIT:
                    self._broken = True
                    self._buffer.clear()
                    break
                if len(self._buffer) < _HEADER.size + size:
                    break
                body = bytes(self._buffer[_HEADER.size : _HEADER.size + size])
                del self._buffer[: _HEADER.size + size]
                try:
                    event = json.loads(body)
                except ValueError:
                    self._broken = True
                    self._buffer.clear()
                    break
                if isinstance(event, dict):
                    self._forward(event)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            os.close(self.fd)


def _apply_limits(limits: dict[str, Any], baseline_vm: int) -> None:
    address_space = baseline_vm + int(limits["memory_mb"]) * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (address_space, address_space))
    cpu = max(1, math.ceil(float(limits["cpu_seconds"])))
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
    resource.setrlimit(resource.RLIMIT_FSIZE, (FILE_SIZE_LIMIT, FILE_SIZE_LIMIT))
    # Past the file-size limit a write fails with EFBIG (a tool error) instead of a kill.
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    processes = limits.get("max_processes")
    if processes and os.getuid() != 0:  # RLIMIT_NPROC does not bind root
        resource.setrlimit(resource.RLIMIT_NPROC, (int(processes), int(processes)))


def _quiet_stdio() -> None:
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)


class _CallCancelled(Exception):
    """The host cancelled the call (or went away) while it ran."""


class _HostWatch:
    """The host's socket while call `call_id` runs: what it sends then is a cancel or nothing
    (it sends the next call only after this one's answer)."""

    def __init__(self, host: socket.socket, call_id: Any) -> None:
        self.host = host
        self.fd = host.fileno()
        self.call_id = call_id

    def cancels(self) -> bool:
        """Read the frame the host sent: True when it cancels this call, or the host is gone."""
        return self.cancelled_by(self.read())

    def read(self) -> dict[str, Any] | None:
        """The frame the host sent; None when the host is gone."""
        try:
            return recv_frame(self.host)
        except (OSError, ValueError):
            return None

    def cancelled_by(self, frame: dict[str, Any] | None) -> bool:
        if frame is None:  # the host went away: nobody waits for the call
            return True
        return frame.get("type") == wire.CANCEL and frame.get("id") == self.call_id


class _HostEvents:
    """What goes to the host while call `call_id` runs, before its reply: the call's events
    and its server's requests to the client, at most `wire.MAX_EVENTS` of them together."""

    def __init__(self, host: socket.socket | None, call_id: Any) -> None:
        self.host = host
        self.call_id = call_id
        self.sent = 0

    def forward(self, event: dict[str, Any], field: str = wire.EVENT_FIELD) -> None:
        self._send(event, wire.EVENT_LIMIT, {"type": wire.EVENT, field: event})

    def notice(self, source: str, message: dict[str, Any]) -> None:
        """Send the host a server's notice (`wire.NOTICE_METHODS`)."""
        frame = {"type": wire.NOTICE, wire.SOURCE_FIELD: source}
        self._send(message, wire.EVENT_LIMIT, {**frame, wire.NOTIFICATION_FIELD: message})

    def ask(self, number: int, message: dict[str, Any]) -> bool:
        """Send the host a server's request to the client; False when it was not sent."""
        frame = {"type": wire.SERVER_REQUEST, wire.REQUEST_FIELD: number}
        return self._send(message, wire.REQUEST_LIMIT, {**frame, wire.MESSAGE_FIELD: message})

    def _send(self, payload: Any, limit: int, frame: dict[str, Any]) -> bool:
        if self.host is None or self.sent >= wire.MAX_EVENTS:
            return False
        try:
            size = len(json.dumps(payload, separators=(",", ":")))
        except (TypeError, ValueError):
            return False
        if size > limit:
            return False
        self.sent += 1
        send_frame(self.host, {**frame, "id": self.call_id})
        return True


def _supervise(
    pid: int,
    read_fd: int,
    started: float,
    limits: dict[str, Any],
    watch: _HostWatch | None = None,
    events: _EventRelay | None = None,
) -> tuple[dict[str, Any], bool]:
    """Collect the child's result until it is complete, the child dies, the deadline passes,
    the output overflows or the host cancels the call, forwarding its events meanwhile. True
    with the outcome when the child still has to be reaped."""
    deadline = started + int(limits["timeout_ms"]) / 1000
    cap = int(limits["max_output_bytes"])
    os.set_blocking(read_fd, False)
    poller = select.poll()
    poller.register(read_fd, select.POLLIN)
    poller.register(_CHILD_EXITS.read_fd, select.POLLIN)
    if watch is not None:
        poller.register(watch.fd, select.POLLIN)
    if events is not None:
        poller.register(events.fd, select.POLLIN)
    buffer = bytearray()
    killed_for, overshoot_ms = None, 0.0
    exited = _CHILD_EXITS.exited(pid)  # it may have died before we started looking
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            killed_for, overshoot_ms = "timeout", (time.monotonic() - deadline) * 1000
            break
        # A look at the child's exit at least every half second, SIGCHLD or not.
        ready = poller.poll(max(1, math.ceil(min(remaining, 0.5) * 1000)))
        if not ready:
            exited = _CHILD_EXITS.exited(pid)
        for fd, event_mask in ready:
            if watch is not None and fd == watch.fd:
                if watch.cancels():
                    killed_for = "cancelled"
            elif fd == _CHILD_EXITS.read_fd:
                exited = _CHILD_EXITS.exited(pid)
            elif events is not None and fd == events.fd:
                events.drain()
                if not (event_mask & select.POLLIN):  # the pipe's writers are all gone
                    poller.unregister(events.fd)
            elif not (chunk := _read_some(read_fd)):
                poller.unregister(read_fd)
            else:
                buffer += chunk
        if killed_for is not None:
            break
        if exited:
            while (chunk := _read_some(read_fd)) and len(buffer) <= cap + _RESULT.size:
                buffer += chunk
        expected = _RESULT.unpack_from(buffer)[0] if len(buffer) >= _RESULT.size else None
        if expected is not None and expected > cap:
            killed_for = "output"
            break
        if expected is not None and len(buffer) >= _RESULT.size + expected:
            # Complete: answer now; the child's exit (address-space teardown) is reaped later.
            os.close(read_fd)
            if events is not None:  # what it reported before its result goes first
                events.drain()
            wall_ms = (time.monotonic() - started) * 1000
            measured, unreaped = _measure_answered(pid)
            payload = bytes(buffer[_RESULT.size : _RESULT.size + expected])
            return _classify_result(payload, limits, {"wall_ms": wall_ms, **measured}), unreaped
        if exited:
            break
    if killed_for is not None:
        _kill_group(pid)
    _, status, usage = os.wait4(pid, 0)
    ended = time.monotonic()
    os.close(read_fd)
    measured = {
        "wall_ms": (ended - started) * 1000,
        "cpu_ms": (usage.ru_utime + usage.ru_stime) * 1000,
        "peak_rss_kb": usage.ru_maxrss,
    }
    return _classify_death(killed_for, status, limits, measured, overshoot_ms), False


def _measure_answered(pid: int) -> tuple[dict[str, Any], bool]:
    """CPU ms and peak RSS of a child that delivered its result, by the runner's own reading
    (never the child's word); True when the child still has to be reaped. A child still
    running is read from /proc, without waiting for it; one whose memory is already gone is
    reaped here (it runs no code any more, so its rusage is final and the wait is brief)."""
    peak_kb, fields = None, None
    with contextlib.suppress(OSError, ValueError, IndexError):
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
        with open(f"/proc/{pid}/status") as status:
            peak_kb = next((int(ln.split()[1]) for ln in status if ln.startswith("VmHWM:")), None)
    if fields is not None and peak_kb is not None:
        ticks = sum(int(f) for f in fields[11:15])  # utime, stime, cutime, cstime
        return {"cpu_ms": ticks * 1000 / _CLOCK_TICKS, "peak_rss_kb": peak_kb}, True
    reaped, _, usage = os.wait4(pid, 0 if fields is not None else os.WNOHANG)
    if not reaped:
        return {"cpu_ms": 0.0, "peak_rss_kb": 0}, True
    cpu_ms = (usage.ru_utime + usage.ru_stime) * 1000
    return {"cpu_ms": cpu_ms, "peak_rss_kb": usage.ru_maxrss}, False


class _ChildExits:
    """Wakes the runner when a child exits: SIGCHLD writes to a pipe it polls (`read_fd`).

    Not a pidfd: `pidfd_open` is denied in the sandbox (with it, tool code could take the
    runner's descriptors by `pidfd_getfd`). A call's child resets all of this at fork."""

    def __init__(self) -> None:
        self.read_fd, self.write_fd = -1, -1

    def install(self) -> None:
        self.read_fd, self.write_fd = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        signal.signal(signal.SIGCHLD, lambda signum, frame: None)
        signal.set_wakeup_fd(self.write_fd, warn_on_full_buffer=False)

    def uninstall_in_child(self) -> None:
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        for fd in (self.read_fd, self.write_fd):
            if fd >= 0:
                os.close(fd)

    def exited(self, pid: int) -> bool:
        """Whether `pid` has exited (left unreaped); drains the wake-ups seen so far."""
        while _read_some(self.read_fd):
            pass
        try:
            found = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:
            return True
        return found is not None


_CHILD_EXITS = _ChildExits()


def _read_some(fd: int) -> bytes:
    try:
        return os.read(fd, 1 << 16)
    except BlockingIOError:
        return b""


def _classify_death(
    killed_for: str | None,
    status: int,
    limits: dict[str, Any],
    usage: dict[str, Any],
    overshoot_ms: float,
) -> dict[str, Any]:
    """The outcome of a child that did not deliver a complete result."""
    if killed_for == "cancelled":
        error = _err("CANCELLED", "the call was cancelled by its caller; its processes were killed")
        return {"reason": "cancelled", "usage": usage, "error": error}
    if killed_for == "timeout":
        message = f"the call ran past its wall-clock limit of {limits['timeout_ms']} ms"
        details = {"timeout_ms": limits["timeout_ms"], "kill_overshoot_ms": overshoot_ms}
        error = _err("TOOL_TIMEOUT", message, details)
        return {"reason": "timeout", "usage": usage, "error": error}
    if killed_for == "output":
        message = (
            f"the result exceeded the output cap of {limits['max_output_bytes']} bytes; "
            "ask for less output (page through it, or write it to a workspace file)"
        )
        details = {"max_output_bytes": limits["max_output_bytes"]}
        error = _err("SANDBOX_OUTPUT_LIMIT", message, details)
        return {"reason": "killed", "usage": usage, "error": error}
    if os.WIFSIGNALED(status):
        return _classify_signal(os.WTERMSIG(status), limits, usage)
    message = f"the call's process exited (status {os.waitstatus_to_exitcode(status)})"
    return {"reason": "killed", "usage": usage, "error": _err("SANDBOX_KILLED", message)}


def _classify_result(
    payload: bytes, limits: dict[str, Any], usage: dict[str, Any]
) -> dict[str, Any]:
    """The outcome of a complete result from the child, with the usage the runner measured.

    Only `ok` with its `result`, or the tool's exception (type names, message, hints), is
    read from the payload: tool code can write this frame itself, so the code, the exit
    reason and the usage are the runner's alone."""
    try:
        body = json.loads(payload)
    except ValueError:
        body = None
    if not isinstance(body, dict):
        error = _err("TOOL_FAILED", "the tool's result could not be read as JSON")
        return {"reason": "error", "usage": usage, "error": error}
    if body.get("ok") is True:
        if OUTPUT in body:
            return {"reason": "ok", "usage": usage, OUTPUT: body[OUTPUT]}
        return {"reason": "ok", "usage": usage, "result": body.get("result")}
    claimed = body.get("error")
    raised = claimed if isinstance(claimed, dict) else {}
    names = raised.get("mro")
    mro = [str(name) for name in names[:64]] if isinstance(names, list) else []
    message = str(raised.get("message", ""))[:2000]
    hints = raised.get("hints")
    if isinstance(hints, dict):  # tools.ToolArgumentsError
        param_hints = {str(k): str(v) for k, v in hints.items()}
        error = {"code": "INVALID_ARGUMENTS", "message": message, "param_hints": param_hints}
        return {"reason": "error", "usage": usage, "error": error}
    if "MemoryError" in mro:
        return {"reason": "oom", "usage": usage, "error": _oom_error(limits, usage)}
    # The host maps the exception to a SERF code by these names (tools.tool_exceptions).
    name = mro[0] if mro else "Exception"
    details = {"type": name, "message": message, "mro": mro}
    told = raised.get("traceback")
    if isinstance(told, str):  # the gateway shows it to the tool's author alone
        details["traceback"] = told[-MAX_TRACEBACK - 3 :]
    error = _err("TOOL_FAILED", f"{name}: {message}", details)
    return {"reason": "error", "usage": usage, "error": error}


def _classify_signal(signum: int, limits: dict[str, Any], usage: dict[str, Any]) -> dict[str, Any]:
    cpu_limit_ms = max(1, math.ceil(float(limits["cpu_seconds"]))) * 1000
    if signum == signal.SIGXCPU or (signum == signal.SIGKILL and usage["cpu_ms"] >= cpu_limit_ms):
        message = (
            f"the call used its {limits['cpu_seconds']} s of CPU and was stopped; "
            "ask for less work per call or a larger cpu_seconds limit"
        )
        error = _err("SANDBOX_CPU_LIMIT", message, {"cpu_seconds": limits["cpu_seconds"]})
        return {"reason": "killed", "usage": usage, "error": error}
    message = f"the call's process was killed by signal {signal.Signals(signum).name}"
    return {"reason": "killed", "usage": usage, "error": _err("SANDBOX_KILLED", message)}


def _oom_error(limits: dict[str, Any], usage: dict[str, Any]) -> dict[str, Any]:
    peak_mb = usage["peak_rss_kb"] / 1024
    message = (
        f"the call ran out of memory at its {limits['memory_mb']} MB limit "
        f"(peak resident {peak_mb:.0f} MB); ask for less work per call, or a larger memory_mb "
        "within the tool's intent"
    )
    details = {"memory_mb": limits["memory_mb"], "peak_rss_kb": usage["peak_rss_kb"]}
    return _err("SANDBOX_OOM", message, details)


def _err(code: str, message: Any, details: dict[str, Any] | None = None) -> dict[str, Any]:
    text = message if isinstance(message, str) else f"{type(message).__name__}: {message}"
    return {"code": code, "message": text, "details": details or {}}


def _exception_of(exc: BaseException) -> dict[str, Any]:
    """What the child says of the tool's exception: its type's names, message, hints, and its
    traceback from the tool's side (the runner's own frames left out)."""
    report: dict[str, Any] = {
        "mro": [cls.__name__ for cls in type(exc).__mro__],
        "message": str(exc)[:2000],
        "traceback": _tool_traceback(exc),
    }
    hints = getattr(exc, "hints", None)
    if isinstance(exc, ValueError) and isinstance(hints, dict):  # tools.ToolArgumentsError
        report["hints"] = hints
    return report


MAX_TRACEBACK = 8000  # characters, its end kept: the innermost frames say where it failed


def _tool_traceback(exc: BaseException) -> str:
    tb = exc.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename == __file__:
        tb = tb.tb_next  # the runner's frames (the child, the invoke): not the tool's
    text = "".join(traceback.format_exception(type(exc), exc, tb))
    return text if len(text) <= MAX_TRACEBACK else "..." + text[-MAX_TRACEBACK:]


def _kill_group(pid: int) -> None:
    for kill in (os.killpg, os.kill):
        with contextlib.suppress(ProcessLookupError):
            kill(pid, signal.SIGKILL)


def _children() -> list[int]:
    me = os.getpid()
    try:
        with open(f"/proc/{me}/task/{me}/children") as listing:
            return [int(p) for p in listing.read().split()]
    except OSError:
        return []


def _sweep_orphans(keep: set[int] | None = None) -> None:
    """Kill whatever the call left behind (but `keep`): as subreaper, every orphan is our
    child."""
    for _ in range(100):
        children = [child for child in _children() if child not in (keep or set())]
        if not children:
            return
        for child in children:
            for kill in (os.killpg, os.kill):
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    kill(child, signal.SIGKILL)
        for child in children:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(child, 0)


def start_egress_forwarder(workspace: str) -> tuple[int, int] | None:
    """(pid, port) of a forked process relaying connections on 127.0.0.1:port to the
    workspace's egress socket; None when loopback is not usable here. Forked before the tool
    modules are imported, so it is small, and it alone runs threads (the runner forks)."""
    try:
        listener = socket.create_server(("127.0.0.1", 0))
        port = listener.getsockname()[1]
        # Loopback is up when a connection to it completes.
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            listener.accept()[0].close()
    except OSError as exc:
        print(f"runner: no egress, loopback is not usable: {exc}", file=sys.stderr)
        return None
    pid = os.fork()
    if pid == 0:  # the forwarder never returns
        try:
            _LIBC.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
            target = os.path.join(workspace, wire.EGRESS_SOCKET_NAME)
            while True:
                connection, _ = listener.accept()
                threading.Thread(target=_relay, args=(connection, target), daemon=True).start()
        finally:
            os._exit(0)
    listener.close()
    return pid, port


def _relay(connection: socket.socket, target: str) -> None:
    """Copy bytes both ways between a tool's connection and the egress socket until both
    sides are done; each side's end of stream is passed on as a half-close. A side that can
    no longer be written to (the proxy refused and closed) stops the copy towards it only:
    what the other side already said (the proxy's refusal) still reaches its reader."""
    upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        upstream.connect(target)
        peers = {connection: upstream, upstream: connection}
        open_sides = [connection, upstream]
        while open_sides:
            readable, _, _ = select.select(open_sides, [], [])
            for side in readable:
                try:
                    data = side.recv(1 << 16)
                except OSError:
                    data = b""
                sent = False
                if data:
                    with contextlib.suppress(OSError):
                        peers[side].sendall(data)
                        sent = True
                if not sent and side in open_sides:
                    open_sides.remove(side)
                    with contextlib.suppress(OSError):
                        peers[side].shutdown(socket.SHUT_WR)
    except OSError:
        pass
    finally:
        connection.close()
        upstream.close()


MCP_PROTOCOL_VERSION = "2025-06-18"
_MAX_SUBSCRIBED = 100  # URIs a server's subscriptions the runner keeps (the gateway's bound)
_IDLE_BUFFER = 1024 * 1024  # what an idle server may write before a line ends
_RPC_CODES = {-32602: "INVALID_ARGUMENTS", -32601: "TOOL_NOT_FOUND"}


class _McpFault(Exception):
    """The server cannot answer this call: its process group is killed."""

    def __init__(self, reason: str, code: str, message: str, details: dict[str, Any]) -> None:
        super().__init__(message)
        self.reason = reason
        self.error = _err(code, message, details)


class _McpServer:
    """One MCP server over stdio: newline-delimited JSON-RPC, one request at a time."""

    def __init__(self, source: str, process: Any, log: Any) -> None:
        self.source = source
        self.process = process
        self.pid: int = process.pid
        self._log = log  # its stderr, for the message when it dies
        self._buffer = bytearray()
        self._ids = 0
        self.initialized: dict[str, Any] | None = None
        self.capabilities: dict[str, Any] = {}  # the client capabilities it was told
        self._asked: dict[int, Any] = {}  # its requests the host was sent: number -> its id
        self._asks = 0

    @classmethod
    def start(cls, spec: dict[str, Any], workspace: str) -> _McpServer:
        import subprocess  # only sandboxes running an MCP server pay for these imports
        import tempfile

        source = str(spec["source"])
        argv, env = _server_command(spec)
        log = tempfile.TemporaryFile()  # noqa: SIM115 (closed with the server, in kill)
        try:
            process = subprocess.Popen(
                argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
                cwd=workspace,
                env=env,
                start_new_session=True,  # its own process group, killed as one
            )
        except OSError as exc:
            log.close()
            raise _McpFault(
                "error",
                "TOOL_FAILED",
                f"mcp_stdio source {source!r}: its command {argv[0]!r} cannot start "
                f"({exc.strerror or exc}); fix the source's command",
                {"source": source, "phase": "start"},
            ) from exc
        os.set_blocking(process.stdout.fileno(), False)  # type: ignore[union-attr]
        return cls(source, process, log)

    def alive(self) -> bool:
        return self.process.poll() is None

    def kill(self) -> None:
        _kill_group(self.pid)
        with contextlib.suppress(Exception):
            self.process.wait(5)
        for stream in (self.process.stdin, self.process.stdout, self._log):
            with contextlib.suppress(Exception):
                stream.close()

    def initialize(self, deadline: float, cap: int) -> None:
        if self.initialized is not None:
            return
        params = {
            "protocolVersion": MCP_PROTOCOL_VERSION,
            "capabilities": self.capabilities,
            "clientInfo": {"name": "conclave", "version": "1"},
        }
        answer = self.request(
            {"method": "initialize", "params": params}, deadline, cap, "initialize"
        )
        if "error" in answer or not isinstance(answer.get("result"), dict):
            raise self._fault("error", "TOOL_FAILED", f"refused initialize: {answer.get('error')}")
        self._send({"jsonrpc": "2.0", "method": "notifications/initialized"}, "initialize")
        self.initialized = answer["result"]

    def request(
        self,
        message: dict[str, Any],
        deadline: float,
        cap: int,
        phase: str = "call",
        watch: _HostWatch | None = None,
        on_event: Any = None,
        on_request: Any = None,
        on_notice: Any = None,
    ) -> dict[str, Any]:
        """The server's response to `message` (a JSON-RPC request without its id); a cancel
        from the host (`watch`) is passed on to the server as `notifications/cancelled`; its
        progress and log notifications meanwhile go to `on_event`, its notices (resource
        updates) to `on_notice`, its requests to the client to `on_request` (answered by the
        host through `watch`)."""
        self._ids += 1
        sent_id = self._ids
        self._send({"jsonrpc": "2.0", "id": sent_id, **message}, phase)
        try:
            return self._response(
                sent_id, deadline, cap, phase, watch, on_event, on_request, on_notice
            )
        finally:
            self._asked.clear()  # answers to come are for a call that is over

    def resubscribe(self, uris: set[str], deadline: float, cap: int) -> None:
        """Subscribe a server just started to what its predecessor was subscribed to."""
        for uri in sorted(uris):
            message = {"method": wire.SUBSCRIBE_METHODS[0], "params": {"uri": uri}}
            self.request(message, deadline, cap, "initialize")

    def drain_idle(self, on_notice: Any) -> bool:
        """Read what the server wrote while no call ran: its notices go to `on_notice`, a
        `ping` is answered, any other request refused (no client is there to ask). False
        when it exited, or wrote a line longer than `_IDLE_BUFFER`."""
        chunk = _read_some(self.process.stdout.fileno())
        if not chunk:  # readable, and nothing to read: its output ended
            return False
        self._buffer += chunk
        while (end := self._buffer.find(b"\n")) >= 0:
            line = bytes(self._buffer[:end])
            del self._buffer[: end + 1]
            try:
                received = json.loads(line) if line.strip() else None
            except ValueError:
                return False
            if not isinstance(received, dict) or "method" not in received:
                continue  # a late answer of a call that is over
            if received.get("method") in wire.NOTICE_METHODS:
                on_notice(self.source, received)
            elif "id" in received:
                try:
                    self._asks_client(received, "idle", None)
                except _McpFault:
                    return False
        return len(self._buffer) <= _IDLE_BUFFER

    def _response(
        self,
        sent_id: int,
        deadline: float,
        cap: int,
        phase: str,
        watch: _HostWatch | None,
        on_event: Any,
        on_request: Any,
        on_notice: Any = None,
    ) -> dict[str, Any]:
        while True:
            try:
                line = self._line(deadline, cap, phase, watch)
            except _CallCancelled:
                params = {"requestId": sent_id, "reason": "the caller cancelled the call"}
                notice = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": params}
                with contextlib.suppress(_McpFault):  # a server gone is found by the next call
                    self._send(notice, phase)
                raise
            try:
                received = json.loads(line)
            except ValueError:
                raise self._fault(
                    "error", "TOOL_FAILED", f"wrote something that is not JSON-RPC: {line[:80]!r}"
                ) from None
            if not isinstance(received, dict):
                raise self._fault("error", "TOOL_FAILED", "wrote a JSON line that is not a message")
            if "method" in received:  # its own request or notification: no client features
                if on_event is not None and received.get("method") in wire.NOTIFICATIONS:
                    on_event(received, wire.NOTIFICATION_FIELD)  # the host reads it
                if on_notice is not None and received.get("method") in wire.NOTICE_METHODS:
                    on_notice(self.source, received)
                if "id" in received:
                    self._asks_client(received, phase, on_request)
                continue
            if received.get("id") == sent_id:
                return received

    def _asks_client(self, received: dict[str, Any], phase: str, on_request: Any) -> None:
        """Pass the server's request on to the host, or answer it here."""
        method, server_id = received.get("method"), received["id"]
        if method == "ping":
            self._send({"jsonrpc": "2.0", "id": server_id, "result": {}}, phase)
            return
        if (
            on_request is not None
            and method in wire.CLIENT_METHODS
            and len(self._asked) < wire.MAX_PENDING_REQUESTS
        ):
            self._asks += 1
            asked = {"method": method, "params": received.get("params") or {}}
            if on_request(self._asks, asked):
                self._asked[self._asks] = server_id
                return
        refusal = {"code": -32601, "message": f"the gateway's caller does not take {method}"}
        self._send({"jsonrpc": "2.0", "id": server_id, "error": refusal}, phase)

    def _answered(self, frame: dict[str, Any], phase: str) -> None:
        """Hand the server the host's answer to one of its requests (`frame`)."""
        server_id = self._asked.pop(frame.get(wire.REQUEST_FIELD), None)  # type: ignore[arg-type]
        if server_id is None:
            return  # not one of its requests, or answered already
        answer: dict[str, Any] = {"jsonrpc": "2.0", "id": server_id}
        if isinstance(frame.get("result"), dict):
            answer["result"] = frame["result"]
        else:
            error = frame.get("error")
            answer["error"] = error if isinstance(error, dict) else {"code": -32603, "message": ""}
        self._send(answer, phase)

    def _send(self, message: dict[str, Any], phase: str) -> None:
        try:
            self.process.stdin.write(json.dumps(message).encode() + b"\n")
            self.process.stdin.flush()
        except OSError:
            raise self._exited(phase) from None

    def _line(
        self, deadline: float, cap: int, phase: str, watch: _HostWatch | None = None
    ) -> bytes:
        fd = self.process.stdout.fileno()
        watched = [fd] if watch is None else [fd, watch.fd]
        while True:
            end = self._buffer.find(b"\n")
            if end >= 0:
                line = bytes(self._buffer[:end])
                del self._buffer[: end + 1]
                if line.strip():
                    return line
                continue
            if len(self._buffer) > cap:
                raise self._fault(
                    "killed",
                    "SANDBOX_OUTPUT_LIMIT",
                    f"wrote more than the output cap of {cap} bytes in one message; it was "
                    "stopped: ask for less output",
                    max_output_bytes=cap,
                )
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise self._timeout(phase)
            ready, _, _ = select.select(watched, [], [], remaining)
            if not ready:
                raise self._timeout(phase)
            if watch is not None and watch.fd in ready:
                frame = watch.read()
                if watch.cancelled_by(frame):
                    raise _CallCancelled
                answers = frame is not None and frame.get("type") == wire.SERVER_ANSWER
                if answers and frame is not None and frame.get("id") == watch.call_id:
                    self._answered(frame, phase)
            if fd not in ready:
                continue
            chunk = _read_some(fd)
            if not chunk and not self.alive():
                raise self._exited(phase)
            self._buffer += chunk

    def _timeout(self, phase: str) -> _McpFault:
        if phase == "initialize":
            return self._fault(
                "error", "TOOL_FAILED", "did not complete initialize within the call's limit"
            )
        return self._fault(
            "timeout", "TOOL_TIMEOUT", "ran past the call's wall-clock limit; it was stopped"
        )

    def _exited(self, phase: str) -> _McpFault:
        with contextlib.suppress(Exception):
            self.process.wait(1)
        status = self.process.poll()
        self._log.seek(0)
        said = self._log.read()[-300:].decode("utf-8", "replace").strip().splitlines()
        last = f": {said[-1]}" if said else ""
        if phase == "initialize":  # never got going: its command or environment is wrong
            return self._fault("error", "TOOL_FAILED", f"exited at start (status {status}){last}")
        return self._fault(
            "killed",
            "UPSTREAM_UNAVAILABLE",
            f"exited during the call (status {status}){last}; the next call starts it again",
        )

    def _fault(self, reason: str, code: str, what: str, **details: Any) -> _McpFault:
        message = f"mcp_stdio source {self.source!r} {what}"
        return _McpFault(reason, code, message, {"source": self.source, **details})

    def cpu_ms(self) -> float:
        with contextlib.suppress(OSError, ValueError, IndexError):
            with open(f"/proc/{self.pid}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
            return sum(int(f) for f in fields[11:15]) * 1000 / _CLOCK_TICKS
        return 0.0

    def peak_rss_kb(self) -> int:
        with contextlib.suppress(OSError, ValueError), open(f"/proc/{self.pid}/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
        return 0


def _server_command(spec: dict[str, Any]) -> tuple[list[str], dict[str, str]]:
    """The server's argv and environment: its prepared package's Python packages and npm
    binaries first on the paths; a command no PATH entry has may be a console script of an
    installed distribution (a wheel unpacked into the image has no scripts)."""
    import shutil  # only sandboxes running an MCP server pay for these imports

    env = {k: v for k, v in os.environ.items() if k not in _PROXY_VARIABLES}
    paths, bins = [], []
    package = spec.get("package")
    if package:
        root = os.path.dirname(importlib.import_module(package).__file__ or "")
        paths.append(os.path.join(root, "deps"))
        bins += [os.path.join(root, "deps", "bin"), os.path.join(root, "node_modules", ".bin")]
    env["PATH"] = os.pathsep.join([*bins, env.get("PATH", "/usr/bin:/bin")])
    env["PYTHONPATH"] = os.pathsep.join([*paths, env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env.update({str(k): str(v) for k, v in (spec.get("env") or {}).items()})
    argv = [str(part) for part in spec["command"]]
    if shutil.which(argv[0], path=env["PATH"]) is None and os.sep not in argv[0]:
        from importlib.metadata import distributions

        for dist in distributions(path=[*paths, *sys.path]):
            for entry in dist.entry_points:
                if entry.group == "console_scripts" and entry.name == argv[0]:
                    module, _, attr = entry.value.partition(":")
                    call = (
                        f"import sys; from {module} import {attr.split('.')[0]} as f; sys.exit(f())"
                    )
                    return [sys.executable, "-c", call, *argv[1:]], env
    return argv, env


def _rpc_error(source: str, error: Any) -> dict[str, Any]:
    """The server's JSON-RPC error as the host's error: invalid params, unknown name, else a
    failure of the server's."""
    raised = error if isinstance(error, dict) else {}
    rpc_code = raised.get("code")
    code = _RPC_CODES.get(rpc_code, "TOOL_FAILED") if isinstance(rpc_code, int) else "TOOL_FAILED"
    message = f"mcp_stdio source {source!r}: {str(raised.get('message', 'failed'))[:500]}"
    return _err(code, message, {"source": source, "rpc_code": rpc_code})


def _reply(request: dict[str, Any], reason: str, **fields: Any) -> dict[str, Any]:
    return {"type": wire.RESULT, "id": request.get("id"), "exit_reason": reason, **fields}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--connect", required=True, help="the host's Unix socket")
    parser.add_argument("--module", action="append", default=[], help="a tool module to import")
    parser.add_argument("--workspace", default=os.getcwd())
    args = parser.parse_args(argv)
    # Not dumpable: no process of the sandbox's user (the tool's) may read or write the
    # runner's memory (/proc/<pid>/mem), ptrace it or take its descriptors (pidfd_getfd).
    if _LIBC.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
        print("runner: cannot make itself non-dumpable; refusing to run", file=sys.stderr)
        return 1
    _LIBC.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    forwarder = start_egress_forwarder(args.workspace)
    runner = Runner(args.module, args.workspace)
    _CHILD_EXITS.install()  # before the first call's child is forked
    if forwarder is not None:
        runner.forwarder_pid, runner.egress_port = forwarder
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(args.connect)
    runner.host_fd, runner.host = sock.fileno(), sock
    try:
        send_frame(sock, runner.hello())
        runner.prepare()
        while (request := recv_frame(sock)) is not None:
            if request.get("type") in (wire.CANCEL, wire.SERVER_ANSWER):
                continue  # its call was answered before it arrived
            send_frame(sock, runner.handle(request))
            runner.finish()
    except (ConnectionResetError, BrokenPipeError):
        pass  # the host went away (it closes a killed call's sandbox with our answer unread)
    _sweep_orphans()
    return 0


if __name__ == "__main__":
    sys.exit(main())

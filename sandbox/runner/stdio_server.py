"""One MCP server over stdio (an `mcp_stdio` source's), kept by the runner in its sandbox.

The runner starts the server on first use as a long-lived child in its own process group
(stdin/stdout pipes, newline-delimited JSON-RPC, one request at a time) and does
`initialize` once, with the client capabilities the relay request names (the calling
client's: sampling, elicitation, roots). A request is relayed within the call's wall-clock
limit; at the limit, on non-JSON output, on a line longer than the output cap or when the
server exits, `McpFault` says why and the relay kills the server's process group (the next
call starts it again). A cancel while the server works on a call is passed on to it as
`notifications/cancelled` for that request; the server keeps running. Its requests to the
client (`runner_wire.CLIENT_METHODS`) go to the host and the host's answers back to it under
its own id; `ping` is answered here, anything else, or more than
`runner_wire.MAX_PENDING_REQUESTS` waiting at once, is refused to it (-32601).
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import select
import sys
import time
from collections.abc import Mapping
from typing import Any

from . import runner_wire as wire
from .call_outcomes import call_error
from .call_supervision import CLOCK_TICKS, kill_group
from .egress_forwarder import PROXY_VARIABLES
from .frames import CallCancelled, HostWatch, read_some
from .runner_guard import install_guard

MCP_PROTOCOL_VERSION = "2025-06-18"
_IDLE_BUFFER = 1024 * 1024  # what an idle server may write before a line ends


class McpFault(Exception):
    """The server cannot answer this call: its process group is killed."""

    def __init__(self, reason: str, code: str, message: str, details: dict[str, Any]) -> None:
        super().__init__(message)
        self.reason = reason
        self.error = call_error(code, message, details)


class McpServer:
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
    def start(cls, spec: wire.RelayServer, workspace: str, guard: bytes | None) -> McpServer:
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
                preexec_fn=lambda: install_guard(guard),  # the runner is single-threaded
            )
        except OSError as exc:
            log.close()
            raise McpFault(
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
        kill_group(self.pid)
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
        message: Mapping[str, Any],
        deadline: float,
        cap: int,
        phase: str = "call",
        watch: HostWatch | None = None,
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
        chunk = read_some(self.process.stdout.fileno())
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
                except McpFault:
                    return False
        return len(self._buffer) <= _IDLE_BUFFER

    def _response(
        self,
        sent_id: int,
        deadline: float,
        cap: int,
        phase: str,
        watch: HostWatch | None,
        on_event: Any,
        on_request: Any,
        on_notice: Any = None,
    ) -> dict[str, Any]:
        while True:
            try:
                line = self._line(deadline, cap, phase, watch)
            except CallCancelled:
                params = {"requestId": sent_id, "reason": "the caller cancelled the call"}
                notice = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": params}
                with contextlib.suppress(McpFault):  # a server gone is found by the next call
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

    def _line(self, deadline: float, cap: int, phase: str, watch: HostWatch | None = None) -> bytes:
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
                    raise CallCancelled
                answers = frame is not None and frame.get("type") == wire.SERVER_ANSWER
                if answers and frame is not None and frame.get("id") == watch.call_id:
                    self._answered(frame, phase)
            if fd not in ready:
                continue
            chunk = read_some(fd)
            if not chunk and not self.alive():
                raise self._exited(phase)
            self._buffer += chunk

    def _timeout(self, phase: str) -> McpFault:
        if phase == "initialize":
            return self._fault(
                "error", "TOOL_FAILED", "did not complete initialize within the call's limit"
            )
        return self._fault(
            "timeout", "TOOL_TIMEOUT", "ran past the call's wall-clock limit; it was stopped"
        )

    def _exited(self, phase: str) -> McpFault:
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

    def _fault(self, reason: str, code: str, what: str, **details: Any) -> McpFault:
        message = f"mcp_stdio source {self.source!r} {what}"
        return McpFault(reason, code, message, {"source": self.source, **details})

    def cpu_ms(self) -> float:
        with contextlib.suppress(OSError, ValueError, IndexError):
            with open(f"/proc/{self.pid}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
            return sum(int(f) for f in fields[11:15]) * 1000 / CLOCK_TICKS
        return 0.0

    def peak_rss_kb(self) -> int:
        with contextlib.suppress(OSError, ValueError), open(f"/proc/{self.pid}/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
        return 0


def _server_command(spec: wire.RelayServer) -> tuple[list[str], dict[str, str]]:
    """The server's argv and environment: its prepared package's Python packages and npm
    binaries first on the paths; a command no PATH entry has may be a console script of an
    installed distribution (a wheel unpacked into the image has no scripts)."""
    import shutil  # only sandboxes running an MCP server pay for these imports

    env = {k: v for k, v in os.environ.items() if k not in PROXY_VARIABLES}
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

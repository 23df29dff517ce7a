"""The MCP stdio relay: a runner request of type "mcp" (`runner_wire.RelayRequest`) names a
server (its source, package, command and environment) and one JSON-RPC message, relayed to
that source's server (`stdio_server.McpServer`, started on first use, living as long as the
sandbox) and answered with the server's response.

A server is started again when a call names other client capabilities than it was told, or
after it failed a call. Subscriptions: the relay remembers the URIs a server was subscribed
to (`resources/subscribe` relayed and answered) and subscribes a server it started again to
them, so a restart keeps them. What a server notifies of them (`runner_wire.NOTICE_METHODS`)
goes to the host as a notice frame: during a call, or while the host watches the idle
sandbox (a request of type "watch", answered when the host cancels it).
"""

from __future__ import annotations

import select
import socket
import time
from typing import Any, cast

from . import runner_wire as wire
from .call_outcomes import call_error, reply
from .frames import CallCancelled, HostEvents, HostWatch
from .stdio_server import McpFault, McpServer

_MAX_SUBSCRIBED = 100  # URIs a server's subscriptions the runner keeps (the gateway's bound)
_RPC_CODES = {-32602: "INVALID_ARGUMENTS", -32601: "TOOL_NOT_FOUND"}


class StdioRelay:
    """The runner's MCP servers, by source name, and what each is subscribed to."""

    def __init__(self, workspace: str, guard: bytes | None) -> None:
        self.workspace = workspace
        self.guard = guard  # the runner's guard, installed in every server (`runner_guard`)
        self.servers: dict[str, McpServer] = {}  # mcp_stdio servers, by source name
        self._subscribed: dict[str, set[str]] = {}  # by source name: URIs it is subscribed to

    def pids(self) -> set[int]:
        """The servers' processes: a call's sweep of orphans leaves them warm."""
        return {server.pid for server in self.servers.values()}

    def relay(
        self, frame: dict[str, Any], host: socket.socket | None, watch: HostWatch | None
    ) -> dict[str, Any]:
        """Relay the request's JSON-RPC message to its MCP server (started if it is not)."""
        request = cast(wire.RelayRequest, frame)  # the host's, which is trusted
        started = time.monotonic()
        limits = request["limits"]
        deadline = started + int(limits["timeout_ms"]) / 1000
        spec = request["server"]
        name = str(spec["source"])
        server = self.servers.get(name)
        asked = request.get("capabilities")  # None: whatever the running server declared
        try:
            if server is not None and asked is not None and server.capabilities != asked:
                server.kill()  # it told the server other capabilities than this caller has
                server = None
            fresh = server is None or not server.alive()
            if server is None or not server.alive():
                if server is not None:
                    server.kill()
                server = self.servers[name] = McpServer.start(spec, self.workspace, self.guard)
                server.capabilities = asked if isinstance(asked, dict) else {}
            before = server.cpu_ms()
            cap = int(limits["max_output_bytes"])
            server.initialize(deadline, cap)
            to_host = HostEvents(host, request["id"])
            if fresh:
                server.resubscribe(self._subscribed.get(name, set()), deadline, cap)
            message = request["message"]
            if message["method"] == "initialize":  # the gateway asks what the server is
                answer: dict[str, Any] = {"result": server.initialized}
            else:
                answer = server.request(
                    message,
                    deadline,
                    cap,
                    watch=watch,
                    on_event=to_host.forward,
                    on_request=to_host.ask,
                    on_notice=to_host.notice,
                )
                if "result" in answer:
                    self._remember(name, message)
        except CallCancelled:
            usage = {"wall_ms": (time.monotonic() - started) * 1000, "cpu_ms": 0.0}
            error = call_error("CANCELLED", f"mcp_stdio source {name!r}: the call was cancelled")
            return reply(frame, "cancelled", usage=usage, error=error)
        except McpFault as fault:
            if server is not None:
                server.kill()
            self.servers.pop(name, None)
            usage = {"wall_ms": (time.monotonic() - started) * 1000, "cpu_ms": 0.0}
            return reply(frame, fault.reason, usage=usage, error=fault.error)
        usage = {
            "wall_ms": (time.monotonic() - started) * 1000,
            "cpu_ms": max(0.0, server.cpu_ms() - before),
            "peak_rss_kb": server.peak_rss_kb(),
        }
        if "error" in answer:
            return reply(frame, "error", usage=usage, error=_rpc_error(name, answer["error"]))
        return reply(frame, "ok", usage=usage, result=answer.get("result"))

    def _remember(self, source: str, message: wire.RelayMessage) -> None:
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

    def watch_servers(
        self, request: dict[str, Any], host: socket.socket | None, watch: HostWatch | None
    ) -> dict[str, Any]:
        """Forward the servers' notices to the host until it cancels the watch (or goes)."""
        started = time.monotonic()
        if watch is None:
            return reply(request, "ok", usage={"wall_ms": 0.0, "cpu_ms": 0.0})
        to_host = HostEvents(host, request.get("id"))
        while True:
            servers = {s.process.stdout.fileno(): s for s in self.servers.values() if s.alive()}
            ready, _, _ = select.select([watch.fd, *servers], [], [])
            if watch.fd in ready and watch.cancels():
                break
            for fd in ready:
                server = servers.get(fd)
                if server is not None and not server.drain_idle(to_host.notice):
                    server.kill()  # gone, or wrote what no client takes: the next call restarts it
                    self.servers.pop(server.source, None)
        usage = {"wall_ms": (time.monotonic() - started) * 1000, "cpu_ms": 0.0}
        return reply(request, "ok", usage=usage)


def _rpc_error(source: str, error: Any) -> dict[str, Any]:
    """The server's JSON-RPC error as the host's error: invalid params, unknown name, else a
    failure of the server's."""
    raised = error if isinstance(error, dict) else {}
    rpc_code = raised.get("code")
    code = _RPC_CODES.get(rpc_code, "TOOL_FAILED") if isinstance(rpc_code, int) else "TOOL_FAILED"
    message = f"mcp_stdio source {source!r}: {str(raised.get('message', 'failed'))[:500]}"
    return call_error(code, message, {"source": source, "rpc_code": rpc_code})

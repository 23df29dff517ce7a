"""The egress proxy: the only way out of a sandbox, one Unix socket per sandbox.

`attach` listens on the sandbox's egress socket (in its workspace, as the runner's channel);
the runner's forwarder brings the tool's proxied connections there. Each connection asks for
one destination: `CONNECT host:port` (a tunnel, as for HTTPS), or a plain-HTTP request in
absolute form (`GET http://host:port/path`, what clients send an HTTP proxy), forwarded with
`Connection: close`. The destination is checked against the allow-list of the call running in
the sandbox at that moment (`Sandbox.current_call`) by `destination_rule`, and the proxy
connects to the addresses checked there. Every request, allowed or not, is audited with the
caller's identity (transport "egress", operation "CONNECT host:port"). A refusal is a 403
whose body is the SERF envelope saying why; a destination that does not answer, a 502.

Bounded: only sandboxes whose tools have network rights are attached (the pool keeps them
apart), and each holds at most `EgressLimits.per_sandbox` open connections, of which at most
`pending_heads` may still be sending their head (within `head_timeout_s`); all sandboxes
together hold at most `total`, a share of the gateway's descriptors. A connection over a cap
is answered at once with a 429 and closed, so one sandbox never spends the descriptors every
other tenant's requests need.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import resource
import time
from dataclasses import dataclass
from urllib.parse import urlsplit

from gateway.egress.destination_rule import EgressRefused, IPAddress, checked_addresses
from gateway.telemetry import AuditRecord, AuditWriter
from protocol import ErrorCode, SerfError
from sandbox import Sandbox
from tools.calls import Invocation

CONNECT_TIMEOUT_S = 10.0  # per address tried
_HOP_BY_HOP = (b"proxy-connection", b"proxy-authorization", b"connection", b"keep-alive")


class _BadRequest(Exception):
    pass


def _descriptor_share() -> int:
    """A quarter of the gateway's descriptors, in connections (each holds two: the sandbox's
    side and the destination's)."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return max(16, soft // 8) if soft != resource.RLIM_INFINITY else 4096


@dataclass(frozen=True)
class EgressLimits:
    per_sandbox: int = 16  # open connections (tunnels and pending heads) of one sandbox
    pending_heads: int = 4  # of those, still sending their request head
    head_timeout_s: float = 2.0  # to send the request's head
    total: int = 0  # over all sandboxes; 0: a quarter of the gateway's descriptors

    def total_connections(self) -> int:
        return self.total or _descriptor_share()


@dataclass
class _Held:
    """What one sandbox holds of the proxy now."""

    open: int = 0
    pending: int = 0


class EgressProxy:
    """Serves each attached sandbox's egress socket; implements `sandbox.instance.EgressGate`."""

    def __init__(self, audit: AuditWriter, limits: EgressLimits | None = None) -> None:
        self.audit = audit
        self.limits = limits or EgressLimits()
        self._total_cap = self.limits.total_connections()
        self._open_total = 0
        self._servers: dict[Sandbox, asyncio.Server] = {}
        self._connections: dict[Sandbox, set[asyncio.Task[None]]] = {}

    async def attach(self, sandbox: Sandbox) -> None:
        path = sandbox.egress_socket
        path.unlink(missing_ok=True)
        connections: set[asyncio.Task[None]] = set()
        held = _Held()

        async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            refusal = self._over_cap(held)
            if refusal is not None:
                writer.write(_response(429, "Too Many Requests", ErrorCode.RATE_LIMITED, refusal))
                writer.close()
                return
            task = asyncio.current_task()
            assert task is not None
            connections.add(task)
            held.open += 1
            held.pending += 1
            self._open_total += 1
            try:
                await self._serve(sandbox, reader, writer, held)
            finally:
                connections.discard(task)
                held.open -= 1
                self._open_total -= 1
                writer.close()

        server = await asyncio.start_unix_server(serve, path=str(path))
        # The sandbox's user (the workspace's owner) connects, and no one else may.
        workspace = os.stat(sandbox.spec.workspace)
        path.chmod(workspace.st_mode & 0o666)
        if (workspace.st_uid, workspace.st_gid) != (os.geteuid(), os.getegid()):
            os.chown(path, workspace.st_uid, workspace.st_gid)
        self._servers[sandbox] = server
        self._connections[sandbox] = connections

    async def detach(self, sandbox: Sandbox) -> None:
        server = self._servers.pop(sandbox, None)
        connections = self._connections.pop(sandbox, set())
        if server is not None:
            server.close()
        for task in list(connections):
            task.cancel()
        sandbox.egress_socket.unlink(missing_ok=True)

    async def aclose(self) -> None:
        for sandbox in list(self._servers):
            await self.detach(sandbox)

    def _over_cap(self, held: _Held) -> str | None:
        """Why a new connection of this sandbox is refused; None when it may open."""
        limits = self.limits
        if held.open >= limits.per_sandbox:
            return (
                f"this sandbox already has {held.open} egress connections open, its cap: "
                "close one before opening another"
            )
        if held.pending >= limits.pending_heads:
            return (
                f"this sandbox already has {held.pending} egress connections that have not "
                f"sent their request head, its cap: send a head within {limits.head_timeout_s} s"
            )
        if self._open_total >= self._total_cap:
            return "the gateway's egress proxy is at its connection cap; retry shortly"
        return None

    async def _serve(
        self,
        sandbox: Sandbox,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        held: _Held,
    ) -> None:
        call = sandbox.current_call  # whose connection this is: the call running now
        started = time.monotonic()
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), self.limits.head_timeout_s)
            destination, forward_head = _parse_head(head)
        except (_BadRequest, asyncio.IncompleteReadError, asyncio.LimitOverrunError) as exc:
            writer.write(_response(400, "Bad Request", ErrorCode.INVALID_REQUEST, str(exc)))
            return
        except (TimeoutError, OSError):
            return
        finally:
            held.pending -= 1
        try:
            if call is None:
                raise EgressRefused("no call is running in this sandbox")
            addresses = await checked_addresses(call.network, destination)
        except EgressRefused as exc:
            self._audit(sandbox, call, destination, started, ErrorCode.PERMISSION_DENIED)
            writer.write(_response(403, "Forbidden", ErrorCode.PERMISSION_DENIED, str(exc)))
            return
        port = int(destination.rpartition(":")[2])
        try:
            upstream_reader, upstream_writer = await _connect(addresses, port)
        except OSError as exc:
            self._audit(sandbox, call, destination, started, ErrorCode.UPSTREAM_UNAVAILABLE)
            message = f"{destination} did not answer: {exc}"
            writer.write(_response(502, "Bad Gateway", ErrorCode.UPSTREAM_UNAVAILABLE, message))
            return
        self._audit(sandbox, call, destination, started, None)
        try:
            if forward_head is None:
                writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
            else:
                upstream_writer.write(forward_head)
            await asyncio.gather(_pipe(reader, upstream_writer), _pipe(upstream_reader, writer))
        finally:
            upstream_writer.close()

    def _audit(
        self,
        sandbox: Sandbox,
        call: Invocation | None,
        destination: str,
        started: float,
        refused: ErrorCode | None,
    ) -> None:
        principal = call.context.principal if call is not None else None
        outcome = "ok" if refused is None else "refused"
        if refused is ErrorCode.UPSTREAM_UNAVAILABLE:
            outcome = "failed"
        self.audit.submit(
            AuditRecord(
                at_ms=int(time.time() * 1000),
                trace_id=call.context.trace_id if call is not None else "",
                tenant=principal.tenant if principal else sandbox.spec.tenant,
                agent=principal.agent if principal else sandbox.spec.agent,
                obo=(principal.obo or "") if principal else "",
                session=call.context.session_id if call is not None else "",
                transport="egress",
                operation=f"CONNECT {destination}",
                tool=call.tool if call is not None else "",
                outcome=outcome,
                code=refused.value if refused is not None else "",
                stage="egress",
                duration_ms=round((time.monotonic() - started) * 1000, 3),
            )
        )


def _parse_head(head: bytes) -> tuple[str, bytes | None]:
    """The destination ("host:port") a request's head asks for, and for a plain-HTTP request
    the head to send on (origin form, `Connection: close`); None for a CONNECT tunnel."""
    lines = head.split(b"\r\n")
    try:
        method, target, version = lines[0].decode("ascii").split(" ")
    except (UnicodeDecodeError, ValueError):
        raise _BadRequest("the request line is not 'METHOD target HTTP/1.x'") from None
    if method == "CONNECT":
        return target, None
    url = urlsplit(target)
    if url.scheme != "http" or not url.hostname:
        raise _BadRequest("ask for CONNECT host:port, or a plain-HTTP absolute URL")
    host = f"[{url.hostname}]" if ":" in url.hostname else url.hostname
    try:
        port = url.port or 80
    except ValueError:
        raise _BadRequest(f"{target!r} has no valid port") from None
    path = (url.path or "/") + (f"?{url.query}" if url.query else "")
    kept = [line for line in lines[1:] if line and not _is_hop_by_hop(line)]
    forward = [f"{method} {path} {version}".encode(), *kept, b"Connection: close", b"", b""]
    return f"{host}:{port}", b"\r\n".join(forward)


def _is_hop_by_hop(header_line: bytes) -> bool:
    return header_line.split(b":", 1)[0].strip().lower() in _HOP_BY_HOP


def _response(status: int, reason: str, code: ErrorCode, message: str) -> bytes:
    body = SerfError.of(code, message).model_dump_json().encode()
    head = (
        f"HTTP/1.1 {status} {reason}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    )
    return head.encode() + body


async def _connect(
    addresses: list[IPAddress], port: int
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A connection to the first of the checked addresses that answers."""
    failure: OSError = OSError("no address to connect to")
    for address in addresses:
        try:
            return await asyncio.wait_for(
                asyncio.open_connection(str(address), port), CONNECT_TIMEOUT_S
            )
        except (OSError, TimeoutError) as exc:
            failure = exc if isinstance(exc, OSError) else OSError(f"{address}: timed out")
    raise failure


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    with contextlib.suppress(OSError):
        while data := await reader.read(1 << 16):
            writer.write(data)
            await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()

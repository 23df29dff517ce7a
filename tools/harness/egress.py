"""Tools that reach for the network, for the egress suite (tests/security/test_egress.py).

Registered only when `tools.harness.egress` is listed in the tool modules. The "internet"
host of the suite is an HTTP server the test runs on this machine at `EGRESS_TEST_PORT`, on
every address (loopback included); each tool's allow-list names it differently:
`egress_fetch` by its literal loopback address, `egress_fetch_by_name` only as `localhost`
(which resolves to loopback, so the gateway refuses it), `egress_fetch_listed_v6` by name and
by both loopback addresses.
"""

from __future__ import annotations

import errno
import os
import socket
import time
import urllib.error
import urllib.request
from typing import Any
from urllib.parse import urlsplit

from protocol import ResourceIntent
from tools.registry import tool

# Below Linux's ephemeral range (32768-60999): a busy test run's client sockets take ports
# there, and one holding this port made the suite's server fail to bind ("Address already
# in use", all of the module's tests at once).
EGRESS_TEST_PORT = 31613
_INTENT = ResourceIntent(memory_mb=128, cpu_seconds=2, timeout_ms=15_000)
_LOOPBACK_V4 = f"127.0.0.1:{EGRESS_TEST_PORT}"
_LOOPBACK_V6 = f"[::1]:{EGRESS_TEST_PORT}"
_BY_NAME = f"localhost:{EGRESS_TEST_PORT}"
_EGRESS_SOCKET = ".conclave-egress.sock"  # sandbox.runner.runner_wire.EGRESS_SOCKET_NAME


def _fetch(url: str, tunnel: bool) -> dict[str, Any]:
    """GET `url` through the proxy the environment names: as urllib does (plain HTTP through
    HTTP_PROXY), or through a CONNECT tunnel (as for HTTPS, through HTTPS_PROXY)."""
    if tunnel:
        return _fetch_through_tunnel(url)
    try:
        with urllib.request.urlopen(url, timeout=10) as answer:
            return {"status": answer.status, "body": answer.read().decode()}
    except urllib.error.HTTPError as refusal:
        return {"status": refusal.code, "body": refusal.read().decode()}


def _fetch_through_tunnel(url: str) -> dict[str, Any]:
    proxy = urlsplit(os.environ["HTTPS_PROXY"])
    target = urlsplit(url)
    host = f"[{target.hostname}]" if ":" in (target.hostname or "") else target.hostname
    destination = f"{host}:{target.port or 80}"
    with socket.create_connection((proxy.hostname, proxy.port), timeout=10) as conn:
        conn.sendall(f"CONNECT {destination} HTTP/1.1\r\nHost: {destination}\r\n\r\n".encode())
        head = b""
        while b"\r\n\r\n" not in head and (chunk := conn.recv(4096)):
            head += chunk
        status = int(head.split(b" ", 2)[1])
        if status != 200:
            rest = head.split(b"\r\n\r\n", 1)[1]
            while chunk := conn.recv(4096):
                rest += chunk
            return {"status": status, "body": rest.decode()}
        request = f"GET {target.path or '/'} HTTP/1.1\r\nHost: {target.netloc}\r\n"
        conn.sendall(request.encode() + b"Connection: close\r\n\r\n")
        answer = b""
        while chunk := conn.recv(4096):
            answer += chunk
    answer_head, _, body = answer.partition(b"\r\n\r\n")
    return {"status": int(answer_head.split(b" ", 2)[1]), "body": body.decode()}


@tool(intent=_INTENT, network=(_LOOPBACK_V4,))
def egress_fetch(url: str, tunnel: bool = False) -> dict[str, Any]:
    """GET `url` through the egress proxy; the test server is listed as 127.0.0.1."""
    return _fetch(url, tunnel)


@tool(intent=_INTENT, network=(_BY_NAME,))
def egress_fetch_by_name(url: str, tunnel: bool = False) -> dict[str, Any]:
    """GET `url` through the egress proxy; the test server is listed only as localhost."""
    return _fetch(url, tunnel)


@tool(intent=_INTENT, network=(_BY_NAME, _LOOPBACK_V4, _LOOPBACK_V6))
def egress_fetch_listed_v6(url: str, tunnel: bool = False) -> dict[str, Any]:
    """GET `url` through the egress proxy; the test server is listed by name and both
    loopback addresses."""
    return _fetch(url, tunnel)


@tool(intent=_INTENT, network=(_LOOPBACK_V4,))
def egress_direct_connect(host: str, port: int) -> str:
    """Open a TCP connection to host:port past the proxy; the errno's name when it fails."""
    try:
        with socket.create_connection((host, port), timeout=5):
            return "connected"
    except OSError as exc:
        return errno.errorcode.get(exc.errno or 0, str(exc))


@tool(intent=_INTENT, network=(_LOOPBACK_V4,))
def egress_hold_connections(count: int, send_head: bool = True, hold_s: float = 0.0) -> list[str]:
    """Open `count` connections to the egress proxy and keep them all open, then hold them
    `hold_s` more seconds: the descriptor flood of issue 26. Each is a CONNECT tunnel to the
    test server, opened once the one before it was answered, or silent (all opened at once,
    never sending a head). Says what each got first: the proxy's status line (a refusal's
    SERF body after it), "silent" (nothing yet) or "closed"."""
    proxy = urlsplit(os.environ["HTTPS_PROXY"])
    held, seen = [], []
    for _ in range(count):
        conn = socket.create_connection((proxy.hostname, proxy.port), timeout=10)
        held.append(conn)
        if send_head:
            head = f"CONNECT {_LOOPBACK_V4} HTTP/1.1\r\nHost: {_LOOPBACK_V4}\r\n\r\n"
            conn.sendall(head.encode())
            seen.append(_first_answer(conn, 5.0))
    if not send_head:
        seen = [_first_answer(conn, 0.5) for conn in held]  # a silent one gets nothing yet
    time.sleep(hold_s)
    for conn in held:
        conn.close()
    return seen


def _first_answer(conn: socket.socket, wait_s: float) -> str:
    """The answer's status line; a refusal's SERF body after it (" | "), as far as it came."""
    conn.settimeout(wait_s)
    try:
        first = conn.recv(2048)
    except TimeoutError:
        return "silent"
    if not first:
        return "closed"
    line, _, rest = first.partition(b"\r\n")
    body = rest.partition(b"\r\n\r\n")[2]
    return line.decode() if b" 200 " in line or not body else f"{line.decode()} | {body!r}"


@tool(intent=_INTENT, network=(_LOOPBACK_V4,))
def egress_socket_present_with_rights() -> bool:
    """Whether this sandbox has the egress proxy's socket (this tool has network rights)."""
    return os.path.exists(os.path.join(os.environ.get("CONCLAVE_WORKSPACE", "."), _EGRESS_SOCKET))

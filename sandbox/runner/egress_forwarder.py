"""Egress: the sandbox has no network but loopback, and a forwarder relays it to the host.

At start the runner listens on 127.0.0.1 and forks one forwarder process that relays each
connection made there to the gateway's egress proxy (the Unix socket `.conclave-egress.sock`
in the workspace). A call whose tool has a network allow-list (the request's `egress`) gets
HTTP_PROXY and HTTPS_PROXY pointing at it (`PROXY_VARIABLES`); the gateway decides what each
connection may reach.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import socket
import sys
import threading

from . import runner_wire as wire
from .call_supervision import LIBC, PR_SET_PDEATHSIG

PROXY_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy")


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
            LIBC.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
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

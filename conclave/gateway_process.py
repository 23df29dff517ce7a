"""The gateway's process in the embedded stack: uvicorn serving on a socket it inherited.

`uvicorn --fd` rebuilds an inherited socket as AF_UNIX whatever it really is, so asyncio
never sets TCP_NODELAY on the TCP connections it accepts; Nagle's algorithm then meets the
client's delayed ACK and every small response waits ~40 ms. Rebuilding the socket with its
real family (auto-detected from the descriptor) avoids that.

The settings, secrets included, arrive through an inherited pipe (`conclave.settings_pipe`),
never through the environment.
"""

from __future__ import annotations

import socket
import sys

import uvicorn

from conclave.settings_pipe import read_settings
from gateway import create_app
from gateway.http import CoalescingHttpToolsProtocol


def main() -> None:
    listener = socket.socket(fileno=int(sys.argv[1]))  # family and type detected from the fd
    settings = read_settings(int(sys.argv[2]))
    # loop "auto" picks uvloop (a dependency); httptools parses, as "auto" would pick.
    # No proxy-header rewriting: nothing reads the client address, and it ran on every request.
    config = uvicorn.Config(
        create_app(settings),
        log_level="warning",
        access_log=False,
        proxy_headers=False,
        http=CoalescingHttpToolsProtocol,  # one socket write per answer, not two
    )
    uvicorn.Server(config).run(sockets=[listener])


if __name__ == "__main__":
    main()

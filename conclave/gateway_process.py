"""The gateway's process in the embedded stack: uvicorn serving on a socket it inherited.

`uvicorn --fd` rebuilds an inherited socket as AF_UNIX whatever it really is, so asyncio
never sets TCP_NODELAY on the TCP connections it accepts; Nagle's algorithm then meets the
client's delayed ACK and every small response waits ~40 ms. Rebuilding the socket with its
real family (auto-detected from the descriptor) avoids that.
"""

from __future__ import annotations

import socket
import sys

import uvicorn

from gateway.http import CoalescingHttpToolsProtocol


def main() -> None:
    listener = socket.socket(fileno=int(sys.argv[1]))  # family and type detected from the fd
    # loop "auto" picks uvloop (a dependency); httptools parses, as "auto" would pick.
    # No proxy-header rewriting: nothing reads the client address, and it ran on every request.
    config = uvicorn.Config(
        "gateway:create_app",
        factory=True,
        log_level="warning",
        access_log=False,
        proxy_headers=False,
        http=CoalescingHttpToolsProtocol,  # one socket write per answer, not two
    )
    uvicorn.Server(config).run(sockets=[listener])


if __name__ == "__main__":
    main()

"""The DNS-rebinding guard: the gateway answers only requests addressed to a host it knows.

A web page the user visits can make its own name resolve to 127.0.0.1 and then talk to a
local gateway from the browser; its requests still carry the page's name in `Host`. Only
the names in `allowed_hosts` (loopback names by default) and the bind host are answered;
any other `Host`, or none, gets a SERF `INVALID_REQUEST` (400) naming the setting to change.
`"*"` in `allowed_hosts` turns the guard off (behind a proxy that checks hosts itself).

The same list judges an `Origin` (`allows_origin`): MCP's transport asks a server to refuse
a browser page from another origin (403), which `/mcp` does; a request without `Origin`
(any non-browser client) passes.
"""

from __future__ import annotations

from collections.abc import Iterable
from urllib.parse import urlsplit

from starlette.types import Receive, Scope, Send

from gateway.http.responses import serf_response
from protocol import ErrorCode, SerfError


class HostCheck:
    """Which `Host` headers this gateway answers."""

    def __init__(self, allowed_hosts: Iterable[str], bind_host: str) -> None:
        self._allowed = {_bare(host) for host in allowed_hosts}
        if bind_host not in ("0.0.0.0", "::"):  # "every interface" is no name a client uses
            self._allowed.add(_bare(bind_host))

    def allows(self, scope: Scope) -> bool:
        if "*" in self._allowed:
            return True
        for name, value in scope["headers"]:
            if name == b"host":
                return _bare(value.decode("latin-1")) in self._allowed
        return False

    def allows_origin(self, origin: str | None) -> bool:
        """Whether a request with this `Origin` header (None: none) may be answered."""
        if origin is None or "*" in self._allowed:
            return True
        try:
            host = urlsplit(origin.strip()).hostname  # lower case, no brackets, no port
        except ValueError:
            return False
        return host is not None and host in self._allowed

    async def refuse(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Answer the request with the refusal, without reading its body."""
        error = SerfError.of(
            ErrorCode.INVALID_REQUEST,
            "this gateway does not answer requests for that Host: add the name to "
            "CONCLAVE_ALLOWED_HOSTS if it is really this gateway's",
        )
        await serf_response(error)(scope, receive, send)


def _bare(host: str) -> str:
    """The host name alone: lower case, no port, no IPv6 brackets."""
    host = host.strip().lower()
    if host.startswith("["):
        return host[1:].split("]", 1)[0]
    if host.count(":") == 1:  # name:port (a bare IPv6 address has several colons)
        return host.split(":", 1)[0]
    return host


__all__ = ["HostCheck"]

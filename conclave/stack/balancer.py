"""An HAProxy configuration for gateway replicas: round robin, health checks, SERF errors.

`write_haproxy(directory, port, backends)` writes `haproxy.cfg` and the error pages it names
into `directory` (`conclave balancer` on the command line). What it chooses, and why:

- Health checks (`GET /healthz` every 300 ms, down after 2 failures): a killed replica gets
  no new requests within about 0.6 s.
- `option httpclose`: HAProxy closes both connections after each answer. With a kept-alive
  client connection, HAProxy silently closes it when the gateway behind it dies (no answer,
  the client's next request meets a closed socket); closed after each answer, a client
  connection is never idle on a gateway that can die.
- `option http-buffer-request`: HAProxy reads a request's whole body before sending it on.
  Otherwise a gateway that dies while the body is on its way (its listening socket closed
  with the connection still in the accept queue) ends the exchange in HAProxy's data phase,
  where it closes the client's connection without an answer (logged `SD`) instead of sending
  its 502 (`SH`).
- A connection that fails before any byte was sent is retried on the other replica
  (`retries 2`, `option redispatch`). A request already sent is never resent by the balancer:
  a gateway that died while serving it may or may not have applied it. The caller settles
  that with its idempotency key.
- HAProxy's own answers (502: the gateway died mid-request; 503: no gateway up; 504: no
  answer within `timeout server`) carry a SERF body, `UPSTREAM_UNAVAILABLE`, retryable, like
  every other answer an agent gets.
"""

from __future__ import annotations

from pathlib import Path

from protocol import ErrorCode, SerfError

ERROR_PAGES = {
    502: (
        "Bad Gateway",
        "the gateway replica serving this request stopped answering before it replied; the"
        " request may or may not have been applied: retry it (a commit with the same"
        " idempotency key, which settles which)",
    ),
    503: ("Service Unavailable", "no gateway replica is up behind the load balancer; retry"),
    504: (
        "Gateway Timeout",
        "the gateway replica did not answer within the load balancer's timeout; the request"
        " may or may not have been applied: retry it (a commit with the same idempotency key)",
    ),
}
CHECK_EVERY_MS = 300


def error_page(status: int) -> str:
    """The raw HTTP answer HAProxy sends for `status`: a SERF envelope."""
    reason, message = ERROR_PAGES[status]
    body = SerfError.of(ErrorCode.UPSTREAM_UNAVAILABLE, message).model_dump_json()
    head = f"HTTP/1.1 {status} {reason}\r\nContent-Type: application/json\r\n"
    head += f"Cache-Control: no-cache\r\nContent-Length: {len(body)}\r\nConnection: close\r\n"
    return f"{head}\r\n{body}"


def haproxy_config(port: int, backends: list[str], pages: Path, log: bool = False) -> str:
    """The configuration: `backends` are the replicas' URLs, `pages` holds the error pages;
    with `log`, HAProxy writes one line per request to its standard output."""
    servers = "".join(
        f"    server g{i} {url.removeprefix('http://')} check inter {CHECK_EVERY_MS} fall 2"
        " rise 1\n"
        for i, url in enumerate(backends)
    )
    errors = "".join(
        f"    errorfile {status} {pages / f'{status}.http'}\n" for status in ERROR_PAGES
    )
    return (
        "global\n    maxconn 512\n"
        + ("    log stdout format raw local0\n" if log else "")
        + "defaults\n    mode http\n"
        + ("    log global\n    option httplog\n" if log else "")
        + "    option httpclose\n    option http-buffer-request\n    option redispatch\n"
        "    retries 2\n"
        "    timeout connect 1s\n    timeout check 1s\n    timeout client 30s\n"
        f"    timeout server 30s\n{errors}"
        f"frontend conclave\n    bind 127.0.0.1:{port}\n    default_backend gateways\n"
        "backend gateways\n    balance roundrobin\n    option httpchk\n"
        "    http-check send meth GET uri /healthz ver HTTP/1.1 hdr Host 127.0.0.1\n"
        f"{servers}"
    )


def write_haproxy(directory: Path, port: int, backends: list[str], log: bool = False) -> Path:
    """Write the error pages and `haproxy.cfg` into `directory`; returns the config's path."""
    directory.mkdir(parents=True, exist_ok=True)
    for status in ERROR_PAGES:
        (directory / f"{status}.http").write_text(error_page(status))
    config = directory / "haproxy.cfg"
    config.write_text(haproxy_config(port, backends, directory.resolve(), log))
    return config

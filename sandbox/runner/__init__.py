"""The in-sandbox runner: a folder mounted whole into every sandbox, standard library only.

It runs inside the sandbox (`python -B <this folder>`, `__main__`), whatever the backend,
and the host imports its one wire definition from here. One module per idea:

| module | holds |
|---|---|
| `runner_wire` | the wire both ends import: message types, fields, limits, socket names |
| `frames` | frames on the host's socket, a call's events pipe, what crosses during a call |
| `runner_loop` | the loop: hello, one request at a time, a forked child per call |
| `call_supervision` | a call's rlimits, its supervision until it answers or dies, orphans |
| `runner_guard` | the filter each child installs: no tool code signals its runner |
| `call_outcomes` | the outcome the runner decides: exit reason, usage, SERF code |
| `egress_forwarder` | loopback relayed to the gateway's egress proxy |
| `stdio_relay`, `stdio_server` | the MCP stdio relay and the servers it keeps |

This `__init__` imports the wire only: the host loads nothing else of the runner.
"""

from .runner_wire import (
    CANCEL,
    CLIENT_METHODS,
    EGRESS_SOCKET_NAME,
    EVENT,
    EVENT_FIELD,
    EVENT_LIMIT,
    FRAME_OVERHEAD,
    HEADER,
    HELLO,
    HELLO_LIMIT,
    LOADED,
    MAX_EVENTS,
    MAX_PENDING_REQUESTS,
    MCP,
    MESSAGE_FIELD,
    NOTICE,
    NOTICE_METHODS,
    NOTIFICATION_FIELD,
    NOTIFICATIONS,
    OUTPUT,
    REQUEST_FIELD,
    REQUEST_LIMIT,
    RESULT,
    SERVER_ANSWER,
    SERVER_REQUEST,
    SOCKET_NAME,
    SOURCE_FIELD,
    SUBSCRIBE_METHODS,
    WATCH,
    RelayMessage,
    RelayRequest,
    RelayServer,
    WireLimits,
    frame_limit,
)

__all__ = [
    "CANCEL",
    "CLIENT_METHODS",
    "EGRESS_SOCKET_NAME",
    "EVENT",
    "EVENT_FIELD",
    "EVENT_LIMIT",
    "FRAME_OVERHEAD",
    "HEADER",
    "HELLO",
    "HELLO_LIMIT",
    "LOADED",
    "MAX_EVENTS",
    "MAX_PENDING_REQUESTS",
    "MCP",
    "MESSAGE_FIELD",
    "NOTICE",
    "NOTICE_METHODS",
    "NOTIFICATIONS",
    "NOTIFICATION_FIELD",
    "OUTPUT",
    "REQUEST_FIELD",
    "REQUEST_LIMIT",
    "RESULT",
    "SERVER_ANSWER",
    "SERVER_REQUEST",
    "SOCKET_NAME",
    "SOURCE_FIELD",
    "SUBSCRIBE_METHODS",
    "WATCH",
    "RelayMessage",
    "RelayRequest",
    "RelayServer",
    "WireLimits",
    "frame_limit",
]

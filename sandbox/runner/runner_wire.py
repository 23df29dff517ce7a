"""The runner protocol's one wire definition, imported by both ends.

Standard library only: the host imports it through `sandbox.runner`'s public names, the
runner (this folder, mounted whole in the sandbox) as its own module. Frames are a 4-byte
big-endian length, then UTF-8 JSON.

A reply answers one request and carries that request's `id`; the host refuses a reply for
any other id. A reply's frame may be at most the call's output cap plus `FRAME_OVERHEAD`
(the usage, exit reason and an error's message and hints around the result): the host
reads no longer frame, and refuses a result over the cap whatever frame it came in. The
hello and the loaded frame after it, sent before any call, may each be at most `HELLO_LIMIT`.

Start: the runner sends `{"type": "hello", "pid", "uid", "python", "egress_port",
"imported", "cpu_ms"}` as soon as it is up, having imported the standard library and its own
package only (`imported`: any other top-level module it had, which should be none); then it
imports the tool modules and sends `{"type": "loaded", "tools", "import_errors",
"baseline_vm_kb", "cpu_ms"}` (`cpu_ms`: the CPU it had used by then, its interpreter's start
included).
The host takes calls after the loaded frame, and refuses a sandbox whose modules failed.

Events: while a call runs, the runner may send frames `{"type": "event", "id": <the call's
id>, "event": {...}}` before its reply: what the tool reported through its context
(`protocol.call_events`: `{"kind": "progress", "progress", "total", "message"}` or
`{"kind": "log", "level", "data", "logger"}`); or, with the field "notification" instead of
"event", one of `NOTIFICATIONS` its MCP server sent, as it came (the host reads it). The
runner forwards at most `MAX_EVENTS` of a call, each at most `EVENT_LIMIT` bytes long; the
host checks both again.

Requests to the client: while an `mcp_stdio` call runs, its server may ask the calling client
something (one of `CLIENT_METHODS`: sampling, elicitation, roots). The runner sends
`{"type": "server_request", "id": <the call's id>, "request": <n>, "message": {"method",
"params"}}` (`n` is the runner's own number for it: the server's id never leaves the sandbox);
the host answers `{"type": "server_answer", "id": <the call's id>, "request": <n>, "result":
...}` (or `"error": {...}`), and the runner hands that to the server under the server's id. At
most `MAX_PENDING_REQUESTS` of a call wait at once, each at most `REQUEST_LIMIT` bytes; the
runner refuses the rest to the server itself (-32601), and the host checks both again.
Inside the sandbox, a call's child writes its events to the runner on a pipe of their own,
each a 4-byte big-endian length, then UTF-8 JSON.

The relay: a call of an `mcp_stdio` source's tool (and a message to its server) is a request of
its own, `RelayRequest`: `{"type": "mcp", "id", "server": {"source", "package", "command",
"env"}, "message": {"method", "params"}, "capabilities", "limits"}`. The runner relays the
message to that server, which it starts on first use and keeps in the sandbox
(`capabilities`: the client features the server may ask for, null to leave a running server
as it was told), and answers it as a call, with the server's result.

Notices: what an `mcp_stdio` server tells its subscribers (one of `NOTICE_METHODS`,
`notifications/resources/updated`) is the sandbox's news, not a call's. The runner sends it as
`{"type": "notice", "id": <the request's id>, "source": <the server's source>,
"notification": <the message as it came>}`, during a call (before its reply) or during a
watch: a request `{"type": "watch", "id": n}` the host sends an idle sandbox whose servers
hold subscriptions. The runner then waits on its servers' output and forwards their notices
until the host cancels the watch (a cancel frame of that id), and answers it as a call.
Each notice is at most `EVENT_LIMIT` bytes; a watch forwards at most `MAX_EVENTS`.
"""

from __future__ import annotations

import struct
from typing import Any, TypedDict

HEADER = struct.Struct(">I")
FRAME_OVERHEAD = 64 * 1024
HELLO_LIMIT = 1024 * 1024
EVENT_LIMIT = 16 * 1024  # one event's JSON
MAX_EVENTS = 1000  # a call's events; more are dropped

# Message types (the "type" field).
HELLO = "hello"  # the runner is up (standard library only), before the tool modules
LOADED = "loaded"  # right after the hello: the tool modules imported, and which failed
RESULT = "result"
MCP = "mcp"  # a request relaying one JSON-RPC message to an mcp_stdio server
CANCEL = "cancel"  # the host stops the call of this id (its answer says cancelled)
EVENT = "event"  # an event of a running call, before its reply
EVENT_FIELD = "event"  # an event frame's field holding what the tool reported
NOTIFICATION_FIELD = "notification"  # ... or what its MCP server notified
NOTIFICATIONS = ("notifications/progress", "notifications/message")
SERVER_REQUEST = "server_request"  # an MCP server asks the calling client, during a call
SERVER_ANSWER = "server_answer"  # the host's answer to a server request
REQUEST_FIELD = "request"  # the runner's number for a server request
MESSAGE_FIELD = "message"  # a server request's {"method", "params"}
CLIENT_METHODS = ("sampling/createMessage", "elicitation/create", "roots/list")
MAX_PENDING_REQUESTS = 4  # a call's server requests waiting for their answer at once
REQUEST_LIMIT = 256 * 1024  # one server request's JSON (a sampling request carries messages)
WATCH = "watch"  # the host asks an idle runner for its servers' notices until it cancels
NOTICE = "notice"  # a notice of a server's, during a call or a watch
SOURCE_FIELD = "source"  # a notice's server (its source's name)
NOTICE_METHODS = ("notifications/resources/updated",)
SUBSCRIBE_METHODS = ("resources/subscribe", "resources/unsubscribe")
OUTPUT = "output"  # a reply's field holding a registered tool's result as MCP content

# The host's Unix socket, and the egress proxy's, in the host directory the runner reaches.
SOCKET_NAME = ".conclave.sock"
EGRESS_SOCKET_NAME = ".conclave-egress.sock"


def frame_limit(max_output_bytes: int) -> int:
    """The longest reply frame a call capped at `max_output_bytes` may send."""
    return max(0, int(max_output_bytes)) + FRAME_OVERHEAD


class WireLimits(TypedDict):
    """A request's limits (`tools.calls.CallLimits`, and the processes the runner may fork)."""

    memory_mb: int
    cpu_seconds: float
    timeout_ms: int
    max_output_bytes: int
    max_processes: int | None


class RelayServer(TypedDict):
    """How the runner starts an `mcp_stdio` source's server: the prepared package it imports
    for its paths (`deps`, `node_modules/.bin`), its command and declared environment."""

    source: str
    package: str
    command: list[str]
    env: dict[str, str]


class RelayMessage(TypedDict):
    """One JSON-RPC request for the server, without its id (the runner numbers them)."""

    method: str
    params: dict[str, Any]


class RelayRequest(TypedDict):
    """The host's request of type `MCP`: one message relayed to one server."""

    type: str  # MCP
    id: int
    server: RelayServer
    message: RelayMessage
    capabilities: dict[str, Any] | None  # None: as the running server was told
    limits: WireLimits

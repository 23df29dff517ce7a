"""A call that reports while it runs is answered as an event stream at `/mcp`.

The official `mcp` client against the gateway (in-process, real Redis, the process
backend's real runner): a tool's progress reaches the client's progress callback before its
result, its log messages arrive as `notifications/message` at or above the caller's
`logging/setLevel` (kept per identity in Redis, so another replica applies it); an
`mcp_stdio` server's and an `mcp_http` upstream's notifications reach the client the same
way; a client that accepts only JSON, or a call that reports nothing, gets plain JSON. The
gateway bounds what a call may report, and cuts a hostile upstream's huge answer at the
call's output cap while it streams, never holding it whole.
"""

from __future__ import annotations

import asyncio
import json
import re
import socket
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, suppress
from pathlib import Path
from typing import Any

import anyio
import httpx
import httpx2
import pytest
from mcp import types
from mcp.client.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from pydantic import HttpUrl
from redis.asyncio import Redis

from conclave.bench.mcp.conformance_suite import running_fixture
from conclave.stack.ports import free_port
from gateway.assembly import create_app
from gateway.config import Settings
from gateway.identity.tokens import issue_token
from sandbox.runner import MAX_EVENTS
from tests.helpers import wait_for
from tools.calls import MAX_EVENT_BYTES
from tools.sources import McpHttpSource, McpStdioSource, PythonSource, ToolSource

# The 2026-07-28 revision deprecates MCP's logging capability (SEP-2577): the `mcp` client
# and FastMCP warn when it is used. The handshake-era clients this serves still use it.
pytestmark = [
    pytest.mark.anyio,
    pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning"),
]

ROOT = Path(__file__).resolve().parents[3]
UPSTREAM = Path(__file__).with_name("reporting_upstream.py")
STDIO_SERVER = ("python3", str(ROOT / "tools" / "harness" / "stdio_mcp_server.py"))
MODULES = ("tools.builtin", "tools.harness.reporting")
HUGE_BYTES = 300 * 1024 * 1024


@asynccontextmanager
async def _gateway(
    settings: Settings, *sources: ToolSource, backend: str = "process"
) -> AsyncIterator[Any]:
    update = {"tool_modules": MODULES, "sandbox_backend": backend}
    app = create_app(settings.model_copy(update=update), sources=sources)
    async with app.router.lifespan_context(app):
        yield app


def _token(settings: Settings, agent: str = "watcher") -> str:
    return issue_token(settings, tenant="stream", agent=agent, scopes=["tool:*"])


class _Heard:
    """What the client heard: progress callbacks, log messages, in order with the result."""

    def __init__(self) -> None:
        self.said: list[tuple[str, Any]] = []

    async def progress(self, progress: float, total: float | None, message: str | None) -> None:
        self.said.append(("progress", (progress, total, message)))

    async def log(self, params: types.LoggingMessageNotificationParams) -> None:
        self.said.append(("log", (params.level, params.data)))

    def of(self, kind: str) -> list[Any]:
        return [what for said, what in self.said if said == kind]


@asynccontextmanager
async def _client(
    app: Any,
    settings: Settings,
    heard: _Heard,
    agent: str = "watcher",
    mode: str = "auto",
    log_level: types.LoggingLevel | None = "info",
) -> AsyncIterator[Client]:
    """The official `mcp` client at the app's /mcp, as `agent` (`mode="legacy"`: on the
    handshake era, which has `logging/setLevel`; the 2026-07-28 wire has not: there each
    request asks for its `log_level`, info here, the handshake era's default, unless told)."""
    http = httpx2.AsyncClient(
        transport=httpx2.ASGITransport(app=app),
        base_url="http://gateway",
        headers={"Authorization": f"Bearer {_token(settings, agent)}"},
    )
    transport = streamable_http_client("http://gateway/mcp", http_client=http)
    client = Client(transport, mode=mode, logging_callback=heard.log, log_level=log_level)
    async with http, client:
        yield client


async def _set_level(client: Client, level: types.LoggingLevel) -> None:
    await client.set_logging_level(level)


@pytest.mark.parametrize("backend", ["process", "inprocess"])
async def test_a_tools_progress_and_logs_reach_the_client_before_its_result(
    settings: Settings, redis: Redis, backend: str
) -> None:
    """In a sandbox (through the runner) and in the gateway's process alike."""
    heard = _Heard()
    async with _gateway(settings, backend=backend) as app, _client(app, settings, heard) as client:
        answer = await client.call_tool("countdown", {"steps": 3}, progress_callback=heard.progress)
        heard.said.append(("result", answer.content[0].text))  # type: ignore[union-attr]
    assert heard.of("progress") == [(float(n), 3.0, f"step {n} of 3") for n in (1, 2, 3)]
    # The level asked for (info, the handshake era's default until a caller sets one).
    assert heard.of("log") == [("info", "counting down"), ("warning", "lift-off")]
    assert heard.said[-1] == ("result", "counted 3")  # the events came first


async def test_set_level_applies_to_the_callers_calls_on_any_replica(
    settings: Settings, redis: Redis
) -> None:
    heard, other = _Heard(), _Heard()
    async with _gateway(settings) as first, _gateway(settings) as second:
        async with _client(first, settings, _Heard(), mode="legacy") as client:
            await _set_level(client, "warning")  # answered by one replica
            init = client.server_capabilities
            assert init is not None and init.logging is not None  # the capability is said
        async with _client(second, settings, heard, mode="legacy") as client:  # another replica
            await client.call_tool("countdown", {"steps": 1})
            await _set_level(client, "debug")
            await client.call_tool("countdown", {"steps": 1})
        async with _client(second, settings, other, "someone-else", "legacy") as client:
            await client.call_tool("countdown", {"steps": 1})
    debug = ("debug", {"said": "debug details"})
    assert heard.of("log") == [
        ("warning", "lift-off"),  # below warning: not sent
        debug,
        ("info", "counting down"),
        ("warning", "lift-off"),
    ]
    assert debug not in other.of("log")  # another identity keeps its own level
    assert ("info", "counting down") in other.of("log")


async def test_a_client_without_event_stream_or_a_quiet_call_gets_plain_json(
    settings: Settings, redis: Redis
) -> None:
    headers = {"Authorization": f"Bearer {_token(settings)}"}
    meta = {"progressToken": "p-1"}
    call = {"name": "countdown", "arguments": {"steps": 2}, "_meta": meta}
    echo = {"name": "echo", "arguments": {"message": "quiet"}, "_meta": meta}
    async with (
        _gateway(settings) as app,
        httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://gateway"
        ) as http,
    ):
        plain = await _post(http, headers, call, "application/json")
        quiet = await _post(http, headers, echo, "application/json, text/event-stream")
        streamed = await _post(http, headers, call, "application/json, text/event-stream")
    for answer in (plain, quiet):
        assert answer.headers["content-type"] == "application/json"
        assert not answer.json()["result"]["isError"]
    assert plain.json()["result"]["content"][0]["text"] == "counted 2"
    assert streamed.headers["content-type"] == "text/event-stream"
    messages = [
        json.loads(line[6:]) for line in streamed.text.splitlines() if line.startswith("data: ")
    ]
    assert [m.get("method") for m in messages] == [
        "notifications/message",
        "notifications/progress",
        "notifications/progress",
        "notifications/message",
        None,
    ]
    assert messages[1]["params"] == {
        "progressToken": "p-1",
        "progress": 1.0,
        "total": 2.0,
        "message": "step 1 of 2",
    }
    assert messages[-1]["id"] == 7 and messages[-1]["result"]["content"][0]["text"] == "counted 2"


async def _post(
    http: httpx.AsyncClient, headers: dict[str, str], params: dict[str, Any], accept: str
) -> httpx.Response:
    message = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": params}
    answer = await http.post("/mcp", json=message, headers={**headers, "accept": accept})
    assert answer.status_code == 200, answer.text
    return answer


async def test_a_call_may_send_only_so_many_events_of_a_bounded_size(
    settings: Settings, redis: Redis
) -> None:
    heard = _Heard()
    async with _gateway(settings) as app, _client(app, settings, heard) as client:
        flood = await client.call_tool("chatter", {"messages": MAX_EVENTS + 500, "size": 10})
        flooded = len(heard.of("log"))
        heard.said.clear()
        big = await client.call_tool("chatter", {"messages": 3, "size": MAX_EVENT_BYTES + 1})
    assert not flood.is_error and not big.is_error  # the call itself is fine
    assert 0 < flooded <= MAX_EVENTS
    assert heard.of("log") == []  # each too large: none sent


async def test_an_mcp_stdio_servers_progress_and_logs_reach_the_client(
    settings: Settings, redis: Redis
) -> None:
    source = McpStdioSource(kind="mcp_stdio", name="odd", command=STDIO_SERVER)
    heard = _Heard()
    async with _gateway(settings, source) as app, _client(app, settings, heard) as client:
        answer = await client.call_tool("odd__report", {}, progress_callback=heard.progress)
    assert answer.content[0].text == "reported"  # type: ignore[union-attr]
    assert heard.of("progress") == [(1.0, 2.0, "1/2"), (2.0, 2.0, "2/2")]
    assert heard.of("log") == [("info", "stdio says info"), ("warning", "stdio says warning")]


@pytest.fixture(scope="module")
def upstream_url() -> Iterator[str]:
    port = free_port()
    child = subprocess.Popen([sys.executable, str(UPSTREAM), "--port", str(port)])

    def listening() -> bool:
        assert child.poll() is None, "the reporting upstream exited before listening"
        with suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
            return True
        return False

    try:
        wait_for(listening, 30, "the reporting upstream listens")
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        child.terminate()
        child.wait(10)


async def test_an_http_upstreams_progress_and_logs_reach_the_client(
    settings: Settings, redis: Redis, upstream_url: str
) -> None:
    source = McpHttpSource(kind="mcp_http", name="far", url=HttpUrl(upstream_url))
    heard = _Heard()
    async with _gateway(settings, source) as app, _client(app, settings, heard) as client:
        answer = await client.call_tool("far__report", {}, progress_callback=heard.progress)
    assert answer.structured_content == {"result": "reported"}
    assert heard.of("progress") == [(1.0, 2.0, "half way"), (2.0, 2.0, "done")]
    logged = [(level, data["msg"]) for level, data in heard.of("log")]
    assert logged == [("info", "upstream says info"), ("warning", "upstream says warning")]


class _HostileUpstream:
    """An MCP upstream whose `huge` tool answers `HUGE_BYTES`, made up as it is sent: as an
    event stream (chunked, no length) or, `framing` "length", as JSON with its length said
    first. `sent` counts what the gateway took of it."""

    def __init__(self, framing: str) -> None:
        self.framing = framing
        self.sent = 0
        self.finished = False

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next(
                    int(line.split(b":")[1])
                    for line in head.split(b"\r\n")
                    if line.lower().startswith(b"content-length")
                )
                message = json.loads(await reader.readexactly(length))
                if "id" not in message:
                    writer.write(b"HTTP/1.1 202 Accepted\r\ncontent-length: 0\r\n\r\n")
                elif message["method"] == "tools/call":
                    await self._huge(writer)
                    return
                else:
                    body = json.dumps(
                        {
                            "jsonrpc": "2.0",
                            "id": message["id"],
                            "result": _answer(message["method"]),
                        }
                    ).encode()
                    writer.write(
                        b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                        + f"content-length: {len(body)}\r\n\r\n".encode()
                        + body
                    )
                await writer.drain()
        except (OSError, asyncio.IncompleteReadError):
            return
        finally:
            writer.close()

    async def _huge(self, writer: asyncio.StreamWriter) -> None:
        chunk = b"x" * (1 << 20)
        if self.framing == "length":
            head = "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
            writer.write(f"{head}content-length: {HUGE_BYTES + 8}\r\n\r\n".encode())
            framed = chunk
            writer.write(b'{"a": "')
        else:
            head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
            writer.write(f"{head}transfer-encoding: chunked\r\n\r\n".encode())
            framed = f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n"
            writer.write(b"6\r\ndata: \r\n")
        while self.sent < HUGE_BYTES:
            writer.write(framed)
            await writer.drain()
            self.sent += len(chunk)
        self.finished = True


def _answer(method: str) -> dict[str, Any]:
    if method == "initialize":
        return {
            "protocolVersion": "2025-06-18",
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "hostile", "version": "1"},
        }
    if method == "tools/list":
        return {"tools": [{"name": "huge", "inputSchema": {"type": "object"}}]}
    return {}


def _peak_rss_kb(*, reset: bool = False) -> int:
    """This process's peak resident memory (kB): the gateway's, in-process here; `reset`
    starts the peak again from now."""
    if reset:
        Path("/proc/self/clear_refs").write_text("5")
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return 0


@pytest.mark.parametrize("framing", ["stream", "length"])
async def test_a_hostile_upstreams_huge_answer_is_cut_at_the_output_cap(
    settings: Settings, redis: Redis, framing: str
) -> None:
    hostile = _HostileUpstream(framing)
    server = await asyncio.start_server(hostile.serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    source = McpHttpSource(
        kind="mcp_http", name="hostile", url=HttpUrl(f"http://127.0.0.1:{port}/mcp")
    )
    async with (
        server,
        _gateway(settings, source) as app,
        _client(app, settings, _Heard()) as client,
    ):
        before_kb = _peak_rss_kb(reset=True)
        answer = await client.call_tool("hostile__huge", {})
        grown_mb = (_peak_rss_kb() - before_kb) / 1024
    assert answer.is_error and answer.structured_content is not None
    assert answer.structured_content["code"] == "SANDBOX_OUTPUT_LIMIT"
    assert not hostile.finished
    # What the gateway took: its cap (1 MiB) and what the sockets' buffers held, not 300 MB.
    assert hostile.sent < 64 * 1024 * 1024, hostile.sent
    assert grown_mb < 100, grown_mb


def _docs_example(name: str) -> str:
    """docs/connect.md's block marked `<!-- example: NAME -->`."""
    text = (ROOT / "docs/connect.md").read_text()
    found = re.search(rf"<!-- example: {re.escape(name)} -->\n```\w*\n(.*?)```", text, re.S)
    assert found is not None, name
    return found.group(1)


async def test_the_documented_reporting_tool_streams_as_the_docs_say(
    settings: Settings, redis: Redis, tmp_path: Path
) -> None:
    module = tmp_path / "reporting_tool.py"
    module.write_text(_docs_example("reporting_tool.py"))
    source = PythonSource(kind="python", name="docs", path=module)
    heard = _Heard()
    async with _gateway(settings, source) as app, _client(app, settings, heard) as client:
        answer = await client.call_tool(
            "docs__resize", {"count": 2}, progress_callback=heard.progress
        )
    assert heard.of("progress") == [(1.0, 2.0, "1 of 2"), (2.0, 2.0, "2 of 2")]
    assert heard.of("log") == [("info", "resizing 2 pictures")]  # debug: below the default
    assert answer.content[0].text == "resized 2"  # type: ignore[union-attr]


async def test_on_the_2026_wire_each_request_asks_for_its_own_log_level(
    settings: Settings, redis: Redis
) -> None:
    """MCP 2026-07-28 has no `logging/setLevel`: a request's `_meta` logLevel decides what
    its call's tools and servers log to it, and a request without one is sent no log
    message, whatever level the identity set on the handshake era."""
    quiet, warned = _Heard(), _Heard()
    async with _gateway(settings) as app:
        async with _client(app, settings, _Heard(), mode="legacy") as client:
            await _set_level(client, "debug")  # the identity's handshake-era level
        async with _client(app, settings, quiet, log_level=None) as client:
            assert client.protocol_version == "2026-07-28"
            silent = await client.call_tool("countdown", {"steps": 1})
        async with _client(app, settings, warned, log_level="warning") as client:
            await client.call_tool("countdown", {"steps": 1})
    assert not silent.is_error
    assert quiet.of("log") == []
    assert warned.of("log") == [("warning", "lift-off")]


async def test_a_2026_request_asking_for_no_log_level_is_refused_400(
    settings: Settings, redis: Redis
) -> None:
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/logLevel": "loud",
    }
    params = {"name": "countdown", "arguments": {"steps": 1}, "_meta": meta}
    headers = {
        "Authorization": f"Bearer {_token(settings)}",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2026-07-28",
        "Mcp-Method": "tools/call",
        "Mcp-Name": "countdown",
    }
    message = {"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": params}
    async with (
        _gateway(settings) as app,
        httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://gateway"
        ) as http,
    ):
        answer = await http.post("/mcp", json=message, headers=headers)
    assert answer.status_code == 400, answer.text
    error = answer.json()["error"]
    assert answer.json()["id"] == 9 and error["code"] == -32602
    assert "logLevel" in error["message"]


@pytest.fixture(scope="module")
def sampling_upstream_url() -> Iterator[str]:
    """The conformance fixture: its `test_sampling` asks the client's model while it runs."""
    with running_fixture() as url:
        yield url


async def test_a_2026_call_whose_server_asks_for_an_undeclared_capability_is_refused_32021(
    settings: Settings, redis: Redis, sampling_upstream_url: str
) -> None:
    """The upstream asks the client to sample; the request declared no `sampling`: the call
    is stopped at once and answered -32021 (HTTP 400) naming the capability, instead of
    waiting out its time limit for an answer no one gives."""
    source = McpHttpSource(kind="mcp_http", name="fx", url=HttpUrl(sampling_upstream_url))
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}},
    }
    params = {"name": "fx__test_sampling", "arguments": {"prompt": "hi"}, "_meta": meta}
    headers = {
        "Authorization": f"Bearer {_token(settings)}",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2026-07-28",
        "Mcp-Method": "tools/call",
        "Mcp-Name": "fx__test_sampling",
    }
    message = {"jsonrpc": "2.0", "id": 11, "method": "tools/call", "params": params}
    async with _gateway(settings, source) as app:
        async with httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://gateway", timeout=60
        ) as http:
            with anyio.fail_after(20):  # not the tool's time limit
                answer = await http.post("/mcp", json=message, headers=headers)
        async with _client(app, settings, _Heard()) as client:  # the official client
            with pytest.raises(MCPError) as raised:
                await client.call_tool("fx__test_sampling", {"prompt": "hi"})
    assert answer.status_code == 400, answer.text
    error = answer.json()["error"]
    assert answer.json()["id"] == 11 and error["code"] == -32021
    assert error["data"]["requiredCapabilities"] == {"sampling": {}}
    assert error["data"]["code"] == "CLIENT_CAPABILITY_MISSING"  # the SERF envelope
    assert raised.value.error.code == -32021


async def test_a_2026_call_whose_stdio_server_asks_for_an_undeclared_capability_is_refused_32021(
    settings: Settings, redis: Redis
) -> None:
    """As through `mcp_http`: the server, run by stdio in the caller's sandbox, asks the
    client to sample; the request declared no `sampling`: the call is stopped at once (the
    server is told it was cancelled, its sandbox stays warm) and answered -32021 naming the
    capability, instead of the server being refused and the call going on."""
    source = McpStdioSource(kind="mcp_stdio", name="odd", command=STDIO_SERVER)
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}},
    }

    def call(rpc_id: int, tool: str, accept: str) -> tuple[dict[str, Any], dict[str, str]]:
        params = {"name": tool, "arguments": {}, "_meta": meta}
        headers = {
            "Authorization": f"Bearer {_token(settings)}",
            "Accept": accept,
            "MCP-Protocol-Version": "2026-07-28",
            "Mcp-Method": "tools/call",
            "Mcp-Name": tool,
        }
        return {"jsonrpc": "2.0", "id": rpc_id, "method": "tools/call", "params": params}, headers

    both = "application/json, text/event-stream"
    async with _gateway(settings, source) as app:
        async with httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://gateway", timeout=60
        ) as http:
            with anyio.fail_after(20):  # not the tool's time limit
                streamed = await http.post(
                    "/mcp", json=(ask := call(12, "odd__sample", both))[0], headers=ask[1]
                )
                plain = await http.post(
                    "/mcp",
                    json=(ask := call(13, "odd__sample", "application/json"))[0],
                    headers=ask[1],
                )
                told = await http.post(
                    "/mcp", json=(ask := call(14, "odd__cancellations", both))[0], headers=ask[1]
                )
        async with _client(app, settings, _Heard()) as client:  # the official client
            with pytest.raises(MCPError) as raised:
                await client.call_tool("odd__sample", {})
    for answer, rpc_id in ((streamed, 12), (plain, 13)):
        assert answer.status_code == 400, answer.text
        error = answer.json()["error"]
        assert answer.json()["id"] == rpc_id and error["code"] == -32021
        assert error["data"]["requiredCapabilities"] == {"sampling": {}}
        assert error["data"]["code"] == "CLIENT_CAPABILITY_MISSING"  # the SERF envelope
        assert error["data"]["details"]["upstream"] == "odd"
    assert raised.value.error.code == -32021
    assert told.status_code == 200, told.text  # the same sandbox's server, warm: told of both
    text = told.json()["result"]["content"][0]["text"]
    assert len(json.loads(text)) == 2, text

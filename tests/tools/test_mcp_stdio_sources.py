"""`mcp_stdio` tool sources: MCP servers nobody here wrote, run in the caller's own sandbox.

Real parts only: `mcp-server-time` (PyPI) on bwrap and on docker, called through REST and the
official `mcp` client at `/mcp`; `@modelcontextprotocol/server-everything` (npm) on docker,
its tools, resources and prompts through `/mcp`; and our misbehaving server
(`tools.harness.stdio_mcp_server`) for the faults: each gets its SERF code, the gateway keeps
serving the other sources, and no server process outlives the gateway.
"""

from __future__ import annotations

import json
import logging
import os
import re
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from types import FrameType
from typing import Any

import anyio
import httpx
import httpx2
import pytest
from mcp.client.client import Client
from mcp.client.streamable_http import streamable_http_client

from conclave.stack import EmbeddedStack
from conclave.stack.config_file import settings_from
from gateway import Settings, create_app, issue_token
from gateway.http import gateway_parts
from protocol import ResourceIntent
from sandbox.instance.channel import RunnerChannel
from sandbox.instance.running_sandbox import Sandbox
from sandbox.pool.warm_pool import SandboxPool
from sandbox.runner import MCP
from tools.calls import Invocation, Placement
from tools.sources import McpStdioSource

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[2]
SECRETS = {"secret": "test-secret-" + "s" * 32, "admin_key": "test-admin-key"}
# Where isolating sandboxes mount the `tools` package: the script needs only the stdlib.
HARNESS = ("python3", "/opt/conclave/code/tools/harness/stdio_mcp_server.py")
# What the stdio call-seam test counts: the pool's calls, its sandbox's, the host's frames.
POOL_EXECUTE = SandboxPool.execute.__code__
SANDBOX_CALL = Sandbox.call.__code__
RUNNER_SEND = RunnerChannel.send.__code__
WATCHED = frozenset({POOL_EXECUTE, SANDBOX_CALL, RUNNER_SEND})


def _settings(redis_url: str, backend: str) -> Settings:
    return Settings(
        redis_url=redis_url, sandbox_backend=backend, allowed_hosts=("gateway",), **SECRETS
    )


def _source(name: str, command: tuple[str, ...], **fields: Any) -> McpStdioSource:
    return McpStdioSource(kind="mcp_stdio", name=name, command=command, **fields)


@asynccontextmanager
async def _gateway(settings: Settings, *sources: McpStdioSource) -> AsyncIterator[Any]:
    app = create_app(settings, sources=sources)
    async with app.router.lifespan_context(app):
        yield app


def _auth(settings: Settings, *scopes: str, agent: str = "caller") -> dict[str, str]:
    token = issue_token(settings, tenant="stdio", agent=agent, scopes=list(scopes))
    return {"Authorization": f"Bearer {token}"}


def _rest(app: Any) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://gateway")


@asynccontextmanager
async def _mcp(app: Any, headers: dict[str, str]) -> AsyncIterator[Client]:
    """The official `mcp` client at our /mcp, in process."""
    http = httpx2.AsyncClient(
        transport=httpx2.ASGITransport(app=app), base_url="http://gateway", headers=headers
    )
    transport = streamable_http_client("http://gateway/mcp", http_client=http)
    async with http, Client(transport) as client:
        yield client


def _running(marker: str) -> list[int]:
    """Processes this test process started (its bwrap sandboxes' included: they descend from
    it) whose command line holds `marker`. Other pytest workers run the same server."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
            except OSError:
                continue
            pid = int(entry)
            if marker.encode() in cmdline and pid != os.getpid() and _descends_from_us(pid):
                found.append(pid)
    return found


def _is_text(value: Any, text: str) -> bool:
    return isinstance(value, str) and value == text


def _descends_from_us(pid: int) -> bool:
    while pid > 1:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            return False
        pid = int(stat.rpartition(")")[2].split()[1])  # the parent: the field after the state
        if pid == os.getpid():
            return True
    return False


async def _call(
    client: httpx.AsyncClient, headers: dict[str, str], tool: str, **body: Any
) -> httpx.Response:
    return await client.post(f"/v1/tools/{tool}/call", json=body, headers=headers, timeout=120)


async def _time_through_rest_and_mcp(settings: Settings) -> None:
    time_source = _source("time", ("mcp-server-time",), pypi=("mcp-server-time",))
    async with _gateway(settings, time_source) as app, _rest(app) as client:
        headers = _auth(settings, "tool:time.*")
        names = {t["name"] for t in (await client.get("/v1/tools", headers=headers)).json()}
        assert {"time__get_current_time", "time__convert_time"} <= names
        arguments = {"timezone": "Europe/Paris"}
        answer = await _call(client, headers, "time__get_current_time", arguments=arguments)
        assert answer.status_code == 200, answer.text
        body = answer.json()
        assert body["result"]["timezone"] == "Europe/Paris"
        assert body["usage"]["sandbox"].startswith(f"{settings.sandbox.backend}:")
        converted = await _call(
            client,
            headers,
            "time.convert_time",  # the dotted name of earlier releases: an alias
            arguments={"source_timezone": "UTC", "time": "12:00", "target_timezone": "Asia/Tokyo"},
        )
        assert converted.json()["result"]["target"]["datetime"].startswith(
            converted.json()["result"]["source"]["datetime"][:10]
        )
        bad = await _call(
            client, headers, "time.get_current_time", arguments={"timezone": "Nowhere/X"}
        )
        assert bad.json()["code"] == "TOOL_FAILED" and not bad.json()["retryable"]
        async with _mcp(app, _auth(settings, "tool:time.*", agent="mcp-user")) as mcp:
            tools = {t.name for t in (await mcp.list_tools()).tools}
            assert "time__get_current_time" in tools
            result = await mcp.call_tool("time__get_current_time", {"timezone": "UTC"})
            assert not result.is_error
            assert result.structured_content is not None
            # The server's structured content, unchanged (no {"result": ...} wrapping added).
            assert result.structured_content["timezone"] == "UTC"


async def test_mcp_server_time_on_bwrap_through_rest_and_the_mcp_client(
    bwrap_available: None, redis_url: str
) -> None:
    await _time_through_rest_and_mcp(_settings(redis_url, "bwrap"))


async def test_mcp_server_time_on_docker_through_rest_and_the_mcp_client(
    docker_engine: str, redis_url: str
) -> None:
    await _time_through_rest_and_mcp(_settings(redis_url, "docker"))


async def test_each_identity_has_its_own_server_kept_warm(
    bwrap_available: None, redis_url: str
) -> None:
    settings = _settings(redis_url, "bwrap")
    async with _gateway(settings, _source("odd", HARNESS)) as app, _rest(app) as client:
        alice, bob = (_auth(settings, "tool:odd.*", agent=a) for a in ("alice", "bob"))
        first = (await _call(client, alice, "odd.pid")).json()
        again = (await _call(client, alice, "odd.pid")).json()
        other = (await _call(client, bob, "odd.pid")).json()
        assert first["result"] == again["result"]  # warm: the same server process
        assert first["usage"]["sandbox"] == again["usage"]["sandbox"]
        assert other["usage"]["sandbox"] != first["usage"]["sandbox"]  # never shared


async def test_an_mcp_stdio_call_passes_the_pool_once_as_one_typed_relay_request(
    bwrap_available: None, redis_url: str
) -> None:
    """Issue 41: a call of an `mcp_stdio` tool is one call of the pool, handed the caller's
    invocation (its arguments as sent) with the message to relay typed beside them, and its
    sandbox sends the runner one relay request of its own: no second invocation whose
    arguments are a JSON-RPC message. Counted by a profiler hook on the event loop's thread,
    which also sees that no str method is called on the tool's entrypoint (its kind is read
    from the typed placement, never parsed again)."""
    settings = _settings(redis_url, "bwrap")
    entrypoint = Placement.stdio("odd", "echo").entrypoint
    entered: dict[int, FrameType] = {}  # the pool's and its sandbox's running calls
    handed: list[Invocation] = []  # what the pool was handed
    sent: list[dict[str, Any]] = []  # the frames the host sent the runner
    parsed: list[str] = []

    def seen(frame: FrameType, event: str, arg: Any) -> None:
        code = frame.f_code
        # A coroutine's frame is "called" again at each resume: each counts once.
        if event == "call" and code in WATCHED and id(frame) not in entered:
            entered[id(frame)] = frame
            if code is POOL_EXECUTE:
                handed.append(frame.f_locals["invocation"])
            elif code is RUNNER_SEND:
                sent.append(dict(frame.f_locals["message"]))
        elif event == "c_call" and _is_text(getattr(arg, "__self__", None), entrypoint):
            parsed.append(f"{code.co_filename}:{frame.f_lineno} {arg.__name__}")

    async with _gateway(settings, _source("odd", HARNESS)) as app, _rest(app) as client:
        headers = _auth(settings, "tool:odd.*")
        warm = await _call(client, headers, "odd.echo", arguments={"text": "warm"})
        assert warm.json()["result"] == "warm", warm.text  # the sandbox and server started
        sys.setprofile(seen)
        try:
            answer = await _call(client, headers, "odd.echo", arguments={"text": "once"})
        finally:
            sys.setprofile(None)
    assert answer.status_code == 200 and answer.json()["result"] == "once", answer.text
    frames = [frame.f_code for frame in entered.values()]
    assert frames.count(POOL_EXECUTE) == 1 and frames.count(SANDBOX_CALL) == 1
    (invocation,) = handed
    assert invocation.arguments == {"text": "once"}  # as the caller sent them
    assert invocation.relay is not None and invocation.relay.method == "tools/call"
    assert invocation.relay.params["name"] == "echo"
    assert invocation.relay.params["arguments"] == {"text": "once"}
    (request,) = sent  # one request, no cancel
    assert request["type"] == MCP and request["server"]["source"] == "odd"
    assert request["message"] == {
        "method": "tools/call",
        "params": {"name": "echo", "arguments": {"text": "once"}},
    }
    assert not {"tool", "entrypoint", "arguments"} & set(request)  # not a tool call's
    assert parsed == []


async def test_a_stdio_servers_content_and_tool_metadata_reach_the_client_unchanged(
    bwrap_available: None, redis_url: str
) -> None:
    from tools.harness.stdio_mcp_server import FORECAST_LISTED, PICTURE

    settings = _settings(redis_url, "bwrap")
    async with (
        _gateway(settings, _source("odd", HARNESS)) as app,
        _mcp(app, _auth(settings, "tool:odd.*")) as mcp,
    ):
        listed = {
            t.name: t.model_dump(by_alias=True, exclude_none=True)
            for t in (await mcp.list_tools()).tools
        }
        picture = (await mcp.call_tool("odd__picture", {})).model_dump(
            by_alias=True, exclude_none=True
        )
        forecast = await mcp.call_tool("odd__forecast", {})
    for field, value in FORECAST_LISTED.items():
        assert listed["odd__forecast"][field] == value, field
    assert picture["content"] == PICTURE["content"]  # an image block, annotations and all
    assert picture["_meta"]["example.com/frame"] == 1
    assert forecast.structured_content == {"celsius": 21.5}


async def test_faults_get_their_serf_codes_and_leave_nothing_running(
    bwrap_available: None, redis_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    settings = _settings(redis_url, "bwrap")
    sources = (
        _source("odd", HARNESS),
        _source("nostart", (*HARNESS, "--start", "exit")),
        _source("hangs", (*HARNESS, "--start", "hang"), intent=ResourceIntent(timeout_ms=2000)),
        _source("twice", (*HARNESS, "--start", "duplicate")),
        _source("missing", ("no-such-mcp-server",)),
    )
    caplog.set_level(logging.INFO, logger="conclave.sources")
    # On the logger itself, and only there: the gateway's JSON logging stops "conclave"
    # records from reaching the root logger, where caplog listens, once it is installed
    # (whether it was depends on the order the tests ran in); each record is heard once.
    sources_log = logging.getLogger("conclave.sources")
    sources_log.addHandler(caplog.handler)
    sources_log.propagate = False
    try:
        await _faults_get_their_serf_codes(settings, sources, caplog)
    finally:
        sources_log.removeHandler(caplog.handler)
        sources_log.propagate = True


async def _faults_get_their_serf_codes(
    settings: Settings, sources: tuple[McpStdioSource, ...], caplog: pytest.LogCaptureFixture
) -> None:
    marker = "harness/stdio_mcp_server.py"
    async with _gateway(settings, *sources) as app, _rest(app) as client:
        headers = _auth(settings, "tool:*")
        names = {t["name"] for t in (await client.get("/v1/tools", headers=headers)).json()}
        assert "odd__echo" in names and "echo" in names
        for refused in ("nostart", "hangs", "twice", "missing"):
            assert not any(n.startswith(f"{refused}__") for n in names)
            lines = [r.getMessage() for r in caplog.records if f"'{refused}'" in r.getMessage()]
            assert len(lines) == 1, lines
        said = {
            name: next(r.getMessage() for r in caplog.records if f"'{name}'" in r.getMessage())
            for name in ("nostart", "hangs", "twice", "missing")
        }
        assert "exited at start" in said["nostart"] and "exiting at start" in said["nostart"]
        assert "initialize" in said["hangs"]
        assert "twice" in said["twice"]
        assert "cannot start" in said["missing"]

        expected = {
            "crash": ("UPSTREAM_UNAVAILABLE", True),
            "garbage": ("TOOL_FAILED", False),
            "flood": ("SANDBOX_OUTPUT_LIMIT", False),
        }
        for tool, (code, retryable) in expected.items():
            failed = (await _call(client, headers, f"odd.{tool}")).json()
            assert (failed["code"], failed["retryable"]) == (code, retryable), failed
            assert "'odd'" in failed["message"]
            back = await _call(client, headers, "odd.echo", arguments={"text": "back"})
            assert back.json()["result"] == "back"  # the next call starts it again
        slow = await _call(
            client, headers, "odd.sleep", arguments={"seconds": 30}, limits={"timeout_ms": 800}
        )
        assert slow.json()["code"] == "TOOL_TIMEOUT" and slow.json()["retryable"]
        assert _running(marker) == []  # killed at its grant, not restarted until needed
        pid = (await _call(client, headers, "odd.pid")).json()["result"]
        assert int(pid) > 0
        assert _running(marker)  # warm while the gateway serves
        builtin = await _call(client, headers, "echo", arguments={"message": "healthy"})
        assert builtin.status_code == 200
    assert _running(marker) == []  # nothing left once the gateway stopped


async def test_a_cancelled_call_is_cancelled_on_the_server_which_stays_warm(
    bwrap_available: None, redis_url: str
) -> None:
    """An agent's `notifications/cancelled` reaches the stdio server as its own
    `notifications/cancelled` for the request the runner relayed; the server keeps running."""
    settings = _settings(redis_url, "bwrap")
    async with _gateway(settings, _source("odd", HARNESS)) as app, _rest(app) as client:
        headers = _auth(settings, "tool:odd.*", agent="canceller")
        pid = (await _call(client, headers, "odd.pid")).json()["result"]
        inflight = gateway_parts(app).inflight
        params = {"name": "odd.wait_cancel", "arguments": {}}
        call = {"jsonrpc": "2.0", "id": "stop-me", "method": "tools/call", "params": params}
        notice = {
            "jsonrpc": "2.0",
            "method": "notifications/cancelled",
            "params": {"requestId": "stop-me"},
        }
        answers: list[httpx.Response] = []
        async with anyio.create_task_group() as group:

            async def post() -> None:
                answers.append(await client.post("/mcp", json=call, headers=headers, timeout=120))

            group.start_soon(post)
            with anyio.fail_after(10):  # until the gateway runs the call
                while not inflight:  # noqa: ASYNC110 (polling the gateway's own table)
                    await anyio.sleep(0.005)
            assert (await client.post("/mcp", json=notice, headers=headers)).status_code == 202
        result = answers[0].json()["result"]
        assert result["isError"] and result["structuredContent"]["code"] == "CANCELLED"
        seen = (await _call(client, headers, "odd.cancellations")).json()["result"]
        assert len(json.loads(seen)) == 1  # the server saw the call it ran cancelled
        assert (await _call(client, headers, "odd.pid")).json()["result"] == pid  # warm


def _readme_examples() -> dict[str, str]:
    text = (ROOT / "docs/tools.md").read_text()
    return dict(re.findall(r"<!-- example: (\S+) -->\n```\w*\n(.*?)```", text, re.S))


async def test_server_everything_from_npm_on_docker_serves_tools_resources_and_prompts(
    docker_engine: str, redis_url: str, tmp_path: Path
) -> None:
    """docs/tools.md's mcp_stdio example, as written, through the embedded stack."""
    config = tmp_path / "conclave.toml"
    config.write_text(_readme_examples()["stdio-conclave.toml"])
    settings = settings_from(config, redis_url=redis_url, port=0, **SECRETS)
    assert settings.sandbox.backend == "docker"
    with EmbeddedStack(settings) as stack:
        token = stack.token("acme", "ops", ["tool:everything.*", "tool:time.*"])
        headers = {"Authorization": f"Bearer {token}"}
        http = httpx2.AsyncClient(headers=headers, timeout=60)
        transport = streamable_http_client(f"{stack.url}/mcp", http_client=http)
        async with http, Client(transport) as mcp:
            tools = {t.name for t in (await mcp.list_tools()).tools}
            assert "everything__echo" in tools
            answer = await mcp.call_tool("everything__echo", {"message": "from npm"})
            assert not answer.is_error, answer
            assert "from npm" in str(answer.content[0].text)  # type: ignore[union-attr]
            resources = (await mcp.list_resources()).resources
            assert resources
            read = await mcp.read_resource(str(resources[0].uri))
            assert read.contents
            prompts = (await mcp.list_prompts()).prompts
            assert any(p.name == "everything__simple-prompt" for p in prompts), prompts
            got = await mcp.get_prompt("everything__simple-prompt", {})
            assert got.messages
        async with httpx2.AsyncClient(headers=headers, timeout=60) as http:
            transport = streamable_http_client(f"{stack.url}/mcp", http_client=http)
            async with Client(transport) as mcp:
                now = await mcp.call_tool("time.get_current_time", {"timezone": "UTC"})
                assert not now.is_error, now
        narrow = {"Authorization": f"Bearer {stack.token('acme', 'other', ['tool:echo'])}"}
        async with httpx.AsyncClient() as rest:
            listed = (await rest.get(f"{stack.url}/v1/tools", headers=narrow)).json()
        assert listed and not any(t["name"].startswith("everything__") for t in listed)


def test_tools_check_starts_each_stdio_source_once(bwrap_available: None, tmp_path: Path) -> None:
    config = tmp_path / "conclave.toml"
    config.write_text(
        '[gateway]\nsandbox_backend = "bwrap"\n\n'
        f'[[source]]\nname = "odd"\nkind = "mcp_stdio"\ncommand = {json.dumps(list(HARNESS))}\n'
        'allow = ["echo", "pid"]\n\n'
        '[[source]]\nname = "bad"\nkind = "mcp_stdio"\ncommand = ["no-such-mcp-server"]\n'
    )
    command = [sys.executable, "-m", "conclave", "tools", "check", str(config)]
    done = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "ok    odd (mcp_stdio): odd__echo, odd__pid" in done.stdout
    assert re.search(r"FAIL  bad \(mcp_stdio\): .*'no-such-mcp-server' cannot start", done.stdout)

"""`mcp_http` tool sources: a FastMCP server, started here in its own process, behind the gateway.

Its tools are called through REST and through the official `mcp` client at our `/mcp`; the
upstream sees the gateway's credential, never the agent's token; an upstream that answers
500, garbage or too slowly gets the right SERF code; one that is down at start-up is not
served while the gateway serves everything else; its resources and prompts reach `/mcp`
for the identities whose scopes cover the source.
"""

from __future__ import annotations

import logging
import re
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import ExitStack, asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import httpx2
import pytest
from mcp.client.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from pydantic import HttpUrl
from redis.asyncio import Redis

from conclave.bench.mcp.mcp_upstream import running_upstream
from conclave.stack.ports import free_port
from gateway.assembly import create_app
from gateway.config import Settings
from gateway.http import gateway_parts
from gateway.identity.tokens import issue_token
from tools.sources import McpHttpSource, load_config

pytestmark = pytest.mark.anyio

UPSTREAM_SECRET = "upstream-credential-7f3a"
CREDENTIAL_ENV = "CONCLAVE_TEST_UPSTREAM_CREDENTIAL"
ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def upstream_url() -> Iterator[str]:
    with running_upstream() as url:
        yield url


def _source(url: str, name: str = "up", **fields: Any) -> McpHttpSource:
    return McpHttpSource(kind="mcp_http", name=name, url=HttpUrl(url), **fields)


@asynccontextmanager
async def _gateway(settings: Settings, *sources: McpHttpSource) -> AsyncIterator[Any]:
    app = create_app(settings, sources=sources)
    async with app.router.lifespan_context(app):
        yield app


def _client(app: Any) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://gateway")


def _auth(settings: Settings, *scopes: str, agent: str = "caller") -> dict[str, str]:
    token = issue_token(settings, tenant="fed", agent=agent, scopes=scopes)
    return {"Authorization": f"Bearer {token}"}


async def _call(
    client: httpx.AsyncClient, headers: dict[str, str], tool: str, **body: Any
) -> httpx.Response:
    return await client.post(f"/v1/tools/{tool}/call", json=body, headers=headers)


@pytest.fixture
def credential(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv(CREDENTIAL_ENV, UPSTREAM_SECRET)
    return CREDENTIAL_ENV


async def test_upstream_tools_are_listed_per_scope_and_called_through_rest(
    settings: Settings, redis: Redis, upstream_url: str, credential: str
) -> None:
    source = _source(upstream_url, credential_env=credential, deny=("garbage",))
    async with _gateway(settings, source) as app, _client(app) as client:
        everything = _auth(settings, "tool:*")
        listed = await client.get("/v1/tools", headers=everything)
        names = {t["name"] for t in listed.json()}
        assert {"up__echo", "up__sleep", "up__fail", "echo"} <= names
        assert "up__garbage" not in names  # denied by the source's filter

        only_echo = _auth(settings, "tool:up.echo", agent="narrow")
        narrow = await client.get("/v1/tools", headers=only_echo)
        assert [t["name"] for t in narrow.json()] == ["up__echo"]  # scope by the dotted alias
        refused = await _call(client, only_echo, "up.sleep", arguments={"ms": 1})
        assert refused.json()["code"] == "TOOL_NOT_ALLOWED"

        answer = await _call(client, only_echo, "up.echo", arguments={"message": "hi"})
        assert answer.status_code == 200, answer.text
        assert answer.json()["result"] == "hi"
        assert answer.json()["usage"]["sandbox"] == "mcp_http:up"


async def test_the_upstream_sees_the_gateways_credential_never_the_agents_token(
    settings: Settings, redis: Redis, upstream_url: str, credential: str
) -> None:
    source = _source(upstream_url, credential_env=credential, credential_header="X-Upstream-Key")
    async with _gateway(settings, source) as app, _client(app) as client:
        headers = _auth(settings, "tool:up.*")
        answer = await _call(client, headers, "up.headers_seen")
        seen = answer.json()["result"]
        assert seen["x-upstream-key"] == f"Bearer {UPSTREAM_SECRET}"
        agent_token = headers["Authorization"].removeprefix("Bearer ")
        assert "authorization" not in seen
        assert agent_token not in str(seen)


async def test_a_credential_file_is_read_by_the_gateway(
    settings: Settings, redis: Redis, upstream_url: str, tmp_path: Any
) -> None:
    secret = tmp_path / "upstream.secret"
    secret.write_text("from-a-file\n")
    secret.chmod(0o600)
    source = _source(upstream_url, credential_file=secret)
    async with _gateway(settings, source) as app, _client(app) as client:
        answer = await _call(client, _auth(settings, "tool:up.*"), "up.headers_seen")
        assert answer.json()["result"]["authorization"] == "Bearer from-a-file"


async def test_the_grant_travels_to_the_upstream_and_a_slow_call_is_cancelled_at_it(
    settings: Settings, redis: Redis, upstream_url: str
) -> None:
    async with _gateway(settings, _source(upstream_url)) as app, _client(app) as client:
        headers = _auth(settings, "tool:up.*")
        deadline = int(time.time() * 1000) + 20_000
        meta = await _call(
            client,
            headers,
            "up.meta_seen",
            limits={"timeout_ms": 4000},
            budget={"deadline_ms": deadline},
        )
        seen = meta.json()["result"]
        assert 0 < seen["conclave/timeout_ms"] <= 4000
        # The caller's deadline, less the margin the gateway keeps to answer in time.
        assert deadline - 1000 < seen["conclave/deadline_ms"] <= deadline

        began = time.monotonic()
        slow = await _call(
            client, headers, "up.sleep", arguments={"ms": 5000}, limits={"timeout_ms": 300}
        )
        waited = time.monotonic() - began
        assert slow.status_code == 504
        error = slow.json()
        assert error["code"] == "TOOL_TIMEOUT" and error["retryable"] is True
        assert waited < 2.0  # cancelled at the grant, not after the upstream's 5 s

        after = await _call(client, headers, "up.echo", arguments={"message": "still here"})
        assert after.json()["result"] == "still here"  # the pool survived the cancel


@pytest.mark.parametrize(
    ("tool", "code", "retryable"),
    [
        ("up.http_500", "UPSTREAM_UNAVAILABLE", True),
        ("up.garbage", "TOOL_FAILED", False),
        ("up.fail", "TOOL_FAILED", False),
    ],
)
async def test_upstream_failures_get_serf_codes(
    settings: Settings, redis: Redis, upstream_url: str, tool: str, code: str, retryable: bool
) -> None:
    async with _gateway(settings, _source(upstream_url)) as app, _client(app) as client:
        answer = await _call(client, _auth(settings, "tool:up.*"), tool)
        error = answer.json()
        assert error["code"] == code, error
        assert error["retryable"] is retryable
        assert error["details"]["upstream"] == "up"


async def test_an_upstream_down_at_start_up_is_not_served_and_the_rest_is(
    settings: Settings,
    redis: Redis,
    upstream_url: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    down = _source("http://127.0.0.1:9/mcp", name="gone")  # discard port: refused
    few = _source(upstream_url, name="few", allow=("echo",))
    with caplog.at_level(logging.WARNING, logger="conclave.upstreams"):
        async with _gateway(settings, down, few) as app, _client(app) as client:
            headers = _auth(settings, "tool:*")
            names = {t["name"] for t in (await client.get("/v1/tools", headers=headers)).json()}
            assert "few__echo" in names and "few__sleep" not in names
            assert not any(n.startswith("gone__") for n in names)
            health = await client.get("/healthz")
            assert health.status_code == 200
            built_in = await _call(client, headers, "echo", arguments={"message": "ok"})
            assert built_in.json()["result"] == "ok"
            missing = await _call(client, headers, "gone.anything")
            assert missing.json()["code"] == "TOOL_NOT_FOUND"
    lines = [r.getMessage() for r in caplog.records if "'gone'" in r.getMessage()]
    assert len(lines) == 1 and "retried" in lines[0]


async def test_the_official_mcp_client_at_our_mcp_calls_lists_and_reads_per_identity(
    settings: Settings, redis: Redis, upstream_url: str
) -> None:
    async with _gateway(settings, _source(upstream_url)) as app:

        @asynccontextmanager
        async def mcp_as(*scopes: str, agent: str) -> AsyncIterator[Client]:
            http = httpx2.AsyncClient(
                transport=httpx2.ASGITransport(app=app),
                base_url="http://gateway",
                headers=_auth(settings, *scopes, agent=agent),
            )
            transport = streamable_http_client("http://gateway/mcp", http_client=http)
            async with http, Client(transport) as client:
                yield client

        async with mcp_as("tool:up.*", agent="full") as client:
            tools = {t.name for t in (await client.list_tools()).tools}
            assert {"up__echo", "up__fail"} <= tools
            answer = await client.call_tool("up__echo", {"message": "via mcp"})
            assert not answer.is_error and answer.structured_content == {"result": "via mcp"}
            failed = await client.call_tool("up.fail", {})
            # The envelope is in `_meta` (the tool has an outputSchema its error need not fit).
            assert failed.is_error and failed.meta is not None
            assert failed.meta["conclave/error"]["code"] == "TOOL_FAILED"

            resources = (await client.list_resources()).resources
            assert [str(r.uri) for r in resources] == ["notes://readme"]
            read = await client.read_resource("notes://readme")
            assert read.contents[0].text == "upstream notes"  # type: ignore[union-attr]
            prompts = (await client.list_prompts()).prompts
            # Prompts are named as the source's tools are; the dotted name stays an alias.
            assert [p.name for p in prompts] == ["up__greet"]
            for name in ("up__greet", "up.greet"):
                prompt = await client.get_prompt(name, {"name": "Ada"})
                assert "Ada" in prompt.messages[0].content.text  # type: ignore[union-attr]

        async with mcp_as("tool:up.echo", "tool:echo", agent="narrow") as client:
            assert (await client.list_resources()).resources == []
            assert (await client.list_prompts()).prompts == []
            with pytest.raises(MCPError) as hidden:
                await client.read_resource("notes://readme")
            assert hidden.value.error.data["code"] == "NOT_FOUND"
            with pytest.raises(MCPError):
                await client.get_prompt("up__greet", {"name": "Ada"})


async def test_a_failing_upstream_tool_opens_its_breaker(
    settings: Settings, redis: Redis, upstream_url: str
) -> None:
    tight = settings.model_copy(update={"breaker_failures": 2})
    async with _gateway(tight, _source(upstream_url)) as app, _client(app) as client:
        headers = _auth(settings, "tool:up.*")
        for _ in range(2):
            failed = await _call(client, headers, "up.http_500")
            assert failed.json()["code"] == "UPSTREAM_UNAVAILABLE"
        refused = (await _call(client, headers, "up.http_500")).json()
        assert refused["code"] == "UPSTREAM_UNAVAILABLE"
        assert "upstream" not in refused["details"], refused  # the breaker, not the upstream
        other = await _call(client, headers, "up.echo", arguments={"message": "fine"})
        assert other.json()["result"] == "fine"  # per tool: the source's other tools still run


def _readme_examples() -> dict[str, str]:
    """docs/tools.md's `mcp_http` example blocks, by the name in their marker."""
    text = (ROOT / "docs/tools.md").read_text()
    blocks = re.findall(r"<!-- example: (http-\S+) -->\n```\w*\n(.*?)```", text, re.S)
    return {name.removeprefix("http-"): block for name, block in blocks}


def _conclave(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "conclave", *args]
    return subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=120)


@contextmanager
def _started(command: list[str], cwd: Path, port: int) -> Iterator[None]:
    """`command` in its own process until it listens on `port`; stopped on exit."""
    child = subprocess.Popen(command, cwd=cwd)
    try:
        stop = time.monotonic() + 30
        while True:
            assert child.poll() is None, f"{command} exited with {child.returncode}"
            try:
                socket.create_connection(("127.0.0.1", port), 0.2).close()
                break
            except OSError:
                assert time.monotonic() < stop, f"{command} did not listen on {port} in 30 s"
                time.sleep(0.05)
        yield
    finally:
        child.terminate()
        child.wait(10)


async def test_the_readme_mcp_http_example_runs_as_written(
    settings: Settings, redis: Redis, tmp_path: Path
) -> None:
    examples = _readme_examples()
    port = str(free_port())  # the docs' 8765 may be taken here
    for name in ("cal_server.py", "conclave.toml"):
        (tmp_path / name).write_text(examples[name].replace("8765", port))
    config = tmp_path / "conclave.toml"
    lines = [line.split("#")[0].split() for line in examples["commands"].splitlines()]
    assert lines[0] == ["python", "cal_server.py", "&"]
    with _started([sys.executable, "cal_server.py"], tmp_path, int(port)):
        for command in lines[1:]:
            assert command[0] == "conclave"
            done = _conclave(*command[1:], cwd=tmp_path)
            assert done.returncode == 0, done.stdout + done.stderr
            assert "ok    cal (mcp_http): cal__days_between (0 resources, 0 prompts)" in done.stdout

        sources = [s for s in load_config(config).source if isinstance(s, McpHttpSource)]
        async with _gateway(settings, *sources) as app, _client(app) as client:
            headers = _auth(settings, "tool:cal.*")
            answer = await _call(
                client,
                headers,
                "cal__days_between",
                arguments={"start": "2025-01-01", "end": "2025-03-01"},
            )
            assert answer.status_code == 200, answer.text
            assert answer.json()["result"] == 59
            rpc = {
                "jsonrpc": "2.0",
                "id": 7,
                "method": "tools/call",
                "params": {
                    "name": "cal__days_between",
                    "arguments": {"start": "2025-03-01", "end": "2025-03-08"},
                },
            }
            over_mcp = await client.post("/mcp", json=rpc, headers=headers)
            assert over_mcp.json()["result"]["structuredContent"] == {"result": 7}


def test_tools_check_connects_to_each_mcp_http_source_and_says_why_not(
    upstream_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CONCLAVE_TEST_FORGED", "key\r\nX-Forged: 1")
    config = tmp_path / "conclave.toml"
    config.write_text(
        f'[[source]]\nname = "up"\nkind = "mcp_http"\nurl = "{upstream_url}"\nallow = ["echo"]\n\n'
        '[[source]]\nname = "gone"\nkind = "mcp_http"\nurl = "http://127.0.0.1:9/mcp"\n\n'
        '[[source]]\nname = "keyless"\nkind = "mcp_http"\n'
        f'url = "{upstream_url}"\ncredential_env = "CONCLAVE_TEST_NOBODY_SET_THIS"\n\n'
        '[[source]]\nname = "forged"\nkind = "mcp_http"\n'
        f'url = "{upstream_url}"\ncredential_env = "CONCLAVE_TEST_FORGED"\n'
    )
    done = _conclave("tools", "check", str(config), cwd=tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert "ok    up (mcp_http): up__echo (1 resources, 1 prompts)" in lines
    gone = [line for line in lines if line.startswith("FAIL  gone (mcp_http): ")]
    assert len(gone) == 1 and "connect" in gone[0].lower()
    keyless = [line for line in lines if line.startswith("FAIL  keyless (mcp_http): ")]
    assert len(keyless) == 1 and "CONCLAVE_TEST_NOBODY_SET_THIS" in keyless[0]
    forged = [line for line in lines if line.startswith("FAIL  forged (mcp_http): ")]
    assert len(forged) == 1 and "line break" in forged[0]


async def test_calls_go_on_after_the_upstream_restarts_and_drops_the_kept_connections(
    settings: Settings, redis: Redis
) -> None:
    port = free_port()
    with ExitStack() as first:
        url = first.enter_context(running_upstream(port=port))
        async with _gateway(settings, _source(url)) as app, _client(app) as client:
            headers = _auth(settings, "tool:up.*")

            async def echo_in_parallel(message: str) -> list[Any]:
                answers: list[Any] = []

                async def one() -> None:
                    answer = await _call(client, headers, "up.echo", arguments={"message": message})
                    answers.append(answer.json().get("result", answer.json()))

                async with anyio.create_task_group() as group:
                    for _ in range(4):  # four connections kept alive in the gateway's pool
                        group.start_soon(one)
                return answers

            assert await echo_in_parallel("first") == ["first"] * 4
            first.close()  # the upstream goes, closing every connection the gateway kept
            with running_upstream(port=port):
                assert await echo_in_parallel("back") == ["back"] * 4


async def _until(check: Any, within_s: float = 10.0) -> None:
    """Wait (polling every few ms, at most `within_s`) until `check()` holds."""
    with anyio.fail_after(within_s):
        while not await check():  # noqa: ASYNC110 (the upstream's state: no event)
            await anyio.sleep(0.005)


async def test_a_call_cancelled_at_the_gateway_is_cancelled_on_the_upstream(
    settings: Settings, redis: Redis
) -> None:
    """An agent's `notifications/cancelled` closes the upstream request and cancels the
    upstream's tool (with a session, by the gateway's own `notifications/cancelled`)."""
    with running_upstream(stateful=True) as url:
        async with _gateway(settings, _source(url)) as app, _client(app) as client:
            headers = _auth(settings, "tool:up.*", agent="canceller")
            inflight = gateway_parts(app).inflight
            params = {"name": "up.wait_cancel", "arguments": {"tag": "from-the-agent"}}
            call = {"jsonrpc": "2.0", "id": 41, "method": "tools/call", "params": params}
            notice = {
                "jsonrpc": "2.0",
                "method": "notifications/cancelled",
                "params": {"requestId": 41},
            }
            answers: list[httpx.Response] = []

            async def running() -> bool:
                return len(inflight) == 1

            async with anyio.create_task_group() as group:

                async def post() -> None:
                    answers.append(await client.post("/mcp", json=call, headers=headers))

                group.start_soon(post)
                await _until(running)
                assert (await client.post("/mcp", json=notice, headers=headers)).status_code == 202
            result = answers[0].json()["result"]
            assert result["isError"] and result["_meta"]["conclave/error"]["code"] == "CANCELLED"

            async def seen_by_the_upstream() -> bool:
                seen = await _call(client, headers, "up.cancellations")
                return "from-the-agent" in seen.json()["result"]

            await _until(seen_by_the_upstream)

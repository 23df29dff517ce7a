"""Served tool names (issue 24): `<source>__<tool>`, fit for model APIs' function-name rule
`^[a-zA-Z0-9_-]{1,64}$`; the dotted `<source>.<tool>` an alias for calls and scopes;
collisions and names past 64 characters refused at start-up, naming the fix."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from redis.asyncio import Redis

from gateway import Settings, create_app, issue_token
from tools import DuplicateToolError, RegisteredTool, ToolRegistry, build_tool
from tools.sources import (
    McpStdioSource,
    PythonSource,
    ToolNameError,
    ToolSource,
    load_config,
)

MODEL_API_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
SECRETS = {"secret": "test-secret-" + "n" * 32, "admin_key": "test-admin-key"}
# Where isolating sandboxes mount the `tools` package: the script needs only the stdlib.
HARNESS = ("python3", "/opt/conclave/code/tools/harness/stdio_mcp_server.py")
TEXT_TOOLS = '''
from tools import tool

@tool
def shout(text: str) -> str:
    """Upper case."""
    return text.upper()
'''


def _python(name: str, path: Path, **fields: Any) -> PythonSource:
    return PythonSource(kind="python", name=name, path=path, **fields)


@asynccontextmanager
async def _gateway(
    redis_url: str, sources: tuple[ToolSource, ...], config_dir: Path
) -> AsyncIterator[Any]:
    (config_dir / "conclave.toml").touch()
    settings = Settings(
        redis_url=redis_url,
        sandbox_backend="bwrap",
        allowed_hosts=("gateway",),
        config=config_dir / "conclave.toml",  # where relative source paths are read from
        **SECRETS,
    )
    app = create_app(settings, sources=sources)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://gateway") as client:
            yield settings, client


def _auth(settings: Settings, *scopes: str, agent: str = "namer") -> dict[str, str]:
    token = issue_token(settings, tenant="names", agent=agent, scopes=list(scopes))
    return {"Authorization": f"Bearer {token}"}


def _rpc(method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": 1, "method": method, "params": params or {}}


# --- the rule, without a gateway -----------------------------------------------------------


def test_a_source_names_its_tools_with_one_separator_and_keeps_the_dotted_alias() -> None:
    source = McpStdioSource(kind="mcp_stdio", name="files", command=("x",))
    assert source.qualified("read") == "files__read"
    assert source.aliases("read") == ("files.read",)
    assert source.qualified("dir/list.all") == "files__dir_list_all"  # outside the rule: _
    dashed = source.model_copy(update={"separator": "-"})
    assert dashed.qualified("read") == "files-read" and dashed.aliases("read") == ("files.read",)


def test_the_separator_is_checked_by_the_config(tmp_path: Path) -> None:
    path = tmp_path / "conclave.toml"
    path.write_text(
        '[[source]]\nname = "s"\nkind = "mcp_stdio"\ncommand = ["x"]\nseparator = ":"\n'
    )
    with pytest.raises(ValueError, match="source 's': separator"):
        load_config(path)


def test_a_name_past_64_characters_is_refused_naming_the_fix() -> None:
    source = McpStdioSource(kind="mcp_stdio", name="a" * 32, command=("x",))
    assert len(source.qualified("t" * 30)) == 64
    with pytest.raises(ToolNameError) as refused:
        source.qualified("t" * 31)
    message = str(refused.value)
    assert "65 characters" in message and "shorter name" in message and "\n" not in message


def test_the_registry_finds_a_tool_by_its_alias_and_refuses_a_name_claimed_twice() -> None:
    registry = ToolRegistry()

    def one(text: str) -> str:
        return text

    def other(text: str) -> str:
        return text

    def served(function: Any, name: str, alias: str) -> RegisteredTool:
        built = build_tool(function, name=name)
        return RegisteredTool(
            built.spec,
            function,
            built.arguments_model,
            None,
            f"test:{function.__name__}",
            aliases=(alias,),
        )

    registry.add(served(one, "a__b__c", "a.b__c"))
    found = registry.get("a.b__c")
    assert found is not None and found.name == "a__b__c"
    assert [t.name for t in registry] == ["a__b__c"]  # listed once, by its served name
    with pytest.raises(DuplicateToolError) as clash:
        registry.add(served(other, "a__b__c", "a__b.c"))
    message = str(clash.value)
    assert "a.b__c" in message and "a__b.c" in message and "\n" not in message


# --- a real gateway on bwrap ---------------------------------------------------------------


@pytest.fixture
async def named(
    bwrap_available: None, redis_url: str, redis: Redis, tmp_path: Path
) -> AsyncIterator[tuple[Settings, httpx.AsyncClient]]:
    """A gateway serving a python source (`text`) and an mcp_stdio source (`odd`)."""
    (tmp_path / "text_tools.py").write_text(TEXT_TOOLS)
    sources = (
        _python("text", Path("text_tools.py")),
        McpStdioSource(kind="mcp_stdio", name="odd", command=HARNESS, allow=("echo", "pid")),
    )
    async with _gateway(redis_url, sources, tmp_path) as (settings, client):
        yield settings, client


BUILT_INS = {"echo", "run_python", "run_shell", "read_file", "write_file"}


@pytest.mark.anyio
async def test_every_served_name_fits_the_model_api_rule(
    named: tuple[Settings, httpx.AsyncClient],
) -> None:
    settings, client = named
    everything = _auth(settings, "tool:*")
    rest = {t["name"] for t in (await client.get("/v1/tools", headers=everything)).json()}
    mcp = await client.post("/mcp", json=_rpc("tools/list"), headers=everything)
    listed = {t["name"] for t in mcp.json()["result"]["tools"]}
    assert listed == rest
    assert {"text__shout", "odd__echo", "odd__pid", "echo", "run_python"} <= listed
    # Only what this stack is configured with, in either spelling: its sources and the
    # built-ins. The in-process registry is the process's, and harness modules other tests
    # imported (AgentDojo's suites keep their dotted names) are in it too.
    ours = {name for name in listed if name.startswith(("text", "odd")) or name in BUILT_INS}
    unfit = sorted(name for name in ours if not MODEL_API_NAME.match(name))
    assert unfit == [], unfit


@pytest.mark.anyio
async def test_the_dotted_names_still_work_for_calls_and_scopes(
    named: tuple[Settings, httpx.AsyncClient],
) -> None:
    settings, client = named
    # Scopes written for the dotted names still cover the tools, listed by their new names.
    dotted = _auth(settings, "tool:text.*", "tool:odd.echo", agent="dotted")
    listed = (await client.post("/mcp", json=_rpc("tools/list"), headers=dotted)).json()
    assert [t["name"] for t in listed["result"]["tools"]] == ["odd__echo", "text__shout"]
    for name, arguments, expected in (
        ("text.shout", {"text": "hi"}, "HI"),
        ("text__shout", {"text": "hi"}, "HI"),
        ("odd.echo", {"text": "back"}, "back"),
        ("odd__echo", {"text": "back"}, "back"),
    ):
        rest = await client.post(
            f"/v1/tools/{name}/call", json={"arguments": arguments}, headers=dotted
        )
        assert rest.status_code == 200 and rest.json()["result"] == expected, rest.text
        call = _rpc("tools/call", {"name": name, "arguments": arguments})
        answer = (await client.post("/mcp", json=call, headers=dotted)).json()["result"]
        assert not answer.get("isError") and answer["content"][0]["text"] == expected
    # A scope in the new spelling covers the dotted alias too; outside it, neither spelling.
    served = _auth(settings, "tool:odd__*", agent="served")
    alias = await client.post("/v1/tools/odd.pid/call", json={"arguments": {}}, headers=served)
    assert alias.status_code == 200, alias.text
    for outside in ("text.shout", "text__shout"):
        refused = await client.post(
            f"/v1/tools/{outside}/call", json={"arguments": {"text": "x"}}, headers=served
        )
        assert refused.json()["code"] == "TOOL_NOT_ALLOWED", refused.text


@pytest.mark.anyio
async def test_two_sources_whose_tools_collide_stop_the_start_up(
    bwrap_available: None, redis_url: str, redis: Redis, tmp_path: Path
) -> None:
    (tmp_path / "first.py").write_text(
        "from tools import tool\n\n@tool\ndef b__c(x: str) -> str:\n    return x\n"
    )
    (tmp_path / "second.py").write_text(
        "from tools import tool\n\n@tool\ndef c(x: str) -> str:\n    return x\n"
    )
    first, second = _python("a", Path("first.py")), _python("a__b", Path("second.py"))
    with pytest.raises(DuplicateToolError) as clash:
        async with _gateway(redis_url, (first, second), tmp_path):
            pass
    message = str(clash.value)
    assert "'a__b__c'" in message and "a.b__c" in message and "a__b.c" in message
    assert "separator" in message and "\n" not in message
    # The fix it names: another separator for one of them.
    apart = second.model_copy(update={"separator": "-"})
    async with _gateway(redis_url, (first, apart), tmp_path) as (settings, client):
        listed = (await client.get("/v1/tools", headers=_auth(settings, "tool:a_*"))).json()
        assert sorted(t["name"] for t in listed) == ["a__b-c", "a__b__c"]

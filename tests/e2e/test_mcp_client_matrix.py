"""The client matrix: the MCP clients people use, each against one real stack (the gateway
under uvicorn with the upstream test server federated as the `mcp_http` source `notes`), each
asserting what its user sees: the tool names, the results, the error text a model reads.

The official `mcp` client (2.x's `Client`, and its `ClientSession` used the 1.x way) is in
test_mcp_clients.py. Here: the 1.x client itself, langchain-mcp-adapters in a LangGraph agent
and the OpenAI Agents SDK, each in a venv of its own (`.client-envs/<name>`, see
tests/e2e/clients/), the agents driven by scripted models; pydantic-ai's MCP toolset and the
fastmcp client in this process; MCP Inspector's CLI on Node 22. The examples of
docs/connect.md that need such a venv or Node (its blocks marked `<!-- example: NAME -->` and
tested-by this file) run here too, as written.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastmcp import Client as FastMcpClient
from fastmcp.exceptions import ToolError
from pydantic_ai import Agent
from pydantic_ai.mcp import MCPToolset
from pydantic_ai.messages import (
    ModelMessage,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from conclave.stack import EmbeddedStack
from tests.e2e.conftest import FEDERATED_ADMIN_KEY, UPSTREAM_SOURCE
from tests.test_docs import Block, page_blocks

pytestmark = pytest.mark.anyio

CLIENTS = Path(__file__).parent / "clients"
CONNECT_PAGE = Path(__file__).resolve().parents[2] / "docs" / "connect.md"
# The rule OpenAI-compatible model APIs apply to function names.
FUNCTION_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
BUILT_INS = ["echo", "read_file"]
FEDERATED_ECHO = f"{UPSTREAM_SOURCE}__echo"


def _register(stack: EmbeddedStack, *tools: str) -> str:
    """A fresh agent of tenant acme allowed `tools`; its bearer token."""
    body = {"tenant": "acme", "agent": f"m{uuid.uuid4().hex[:8]}", "tools": list(tools)}
    answer = httpx.post(
        f"{stack.url}/v1/agents", json=body, headers=stack.admin_headers, timeout=30
    )
    assert answer.status_code == 201, answer.text
    token: str = answer.json()["token"]
    return token


def _reader_env(stack: EmbeddedStack, home: Path, **extra: str) -> dict[str, str]:
    """A client's process: the stack's URL and admin key (as docs/connect.md has them), a
    HOME of its own (Inspector keeps a catalog there), nothing of this test run's Python."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env = {k: v for k, v in env.items() if not k.startswith("CONCLAVE_")}
    reader = {"CONCLAVE_URL": stack.url, "CONCLAVE_ADMIN_KEY": FEDERATED_ADMIN_KEY}
    return env | reader | {"HOME": str(home)} | extra


def _run(
    argv: list[str], env: dict[str, str], cwd: Path, exit_code: int = 0
) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True, timeout=300)
    said = f"{argv}: exit {done.returncode}\n{done.stdout}\n{done.stderr}"
    assert done.returncode == exit_code, said
    return done


def _report(done: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    """The one JSON object a client script prints last."""
    report: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return report


def test_a_langgraph_agent_sees_a_raising_tool_and_a_revoked_token_as_tool_errors(
    federated_stack: EmbeddedStack,
    client_env_python: Callable[[str], Path],
    tmp_path: Path,
) -> None:
    """langchain-mcp-adapters (on the mcp 1.x client it pins) in a StateGraph with langgraph's
    ToolNode as it comes: a tool that raises and a token revoked mid-run reach the model as
    error ToolMessages saying what happened, and the run ends with the model's answer."""
    python = client_env_python("langchain")
    script = CLIENTS / "langchain_graph_run.py"
    done = _run([str(python), str(script)], _reader_env(federated_stack, tmp_path), tmp_path)
    report = _report(done)
    assert report["outcome"] == "ended", report
    assert report["tools"] == BUILT_INS
    tool_messages = [m for m in report["messages"] if m["type"] == "ToolMessage"]
    echoed, raised, revoked = tool_messages
    assert (echoed["status"], echoed["text"]) == ("success", "first")
    assert raised["status"] == "error"
    assert "NOT_FOUND" in raised["text"] and "no-such-file.txt" in raised["text"]
    assert revoked["status"] == "error" and "AUTH_REVOKED" in revoked["text"], revoked
    assert report["messages"][-1] == {"type": "AIMessage", "status": None, "text": "done"}


def test_the_mcp_1x_client_keeps_its_session_through_refusals(
    federated_stack: EmbeddedStack,
    client_env_python: Callable[[str], Path],
    tmp_path: Path,
) -> None:
    """The official client's 1.x line itself (test_mcp_clients.py drives 2.x's `ClientSession`
    the 1.x way): each refusal is a tool error with the SERF text, and the session goes on."""
    python = client_env_python("langchain")
    script = CLIENTS / "mcp1_session_run.py"
    done = _run([str(python), str(script)], _reader_env(federated_stack, tmp_path), tmp_path)
    report = _report(done)
    assert report["mcp"].startswith("1."), report
    assert report["outcome"] == "ended", report
    assert report["tools"] == BUILT_INS
    refused, after_refused, unknown, after_unknown, wrong, after_wrong = report["calls"]
    assert refused["is_error"] and refused["text"].startswith("TOOL_NOT_ALLOWED")
    assert unknown["is_error"] and unknown["text"].startswith("TOOL_NOT_FOUND")
    assert wrong["is_error"] and "- message: Field required" in wrong["text"]
    assert [after_refused, after_unknown, after_wrong] == [
        {"is_error": False, "text": f"after {what}"}
        for what in ("a refused tool", "an unknown tool", "bad arguments")
    ]


def test_the_openai_agents_sdk_lists_and_calls_through_conclave(
    federated_stack: EmbeddedStack,
    client_env_python: Callable[[str], Path],
    tmp_path: Path,
) -> None:
    """`MCPServerStreamableHttp` offers the model every tool the agent may call, under names
    a model API accepts as function names (the federated ones too), and the model reads
    each call's text."""
    python = client_env_python("openai_agents")
    script = CLIENTS / "openai_agents_run.py"
    done = _run([str(python), str(script)], _reader_env(federated_stack, tmp_path), tmp_path)
    report = _report(done)
    offered = report["offered"]
    assert set(BUILT_INS) <= set(offered) and FEDERATED_ECHO in offered, offered
    assert all(FUNCTION_NAME.match(name) for name in offered), offered
    assert report["outputs"] == ["from the agents sdk", "federated"]
    assert report["final"] == "done"


async def test_pydantic_ai_calls_through_its_mcp_toolset_with_a_log_level(
    federated_stack: EmbeddedStack,
) -> None:
    """pydantic-ai's `MCPToolset` with `log_level` and a FunctionModel: the model is offered
    the tools, calls two, reads their results, and a failing call comes back to it to retry,
    with the SERF error. It discovers the 2026-07-28 wire, which has no `logging/setLevel`,
    and says so (it sent one after the handshake when the gateway had only that era)."""
    token = _register(federated_stack, *BUILT_INS, f"{UPSTREAM_SOURCE}.*")
    offered: list[str] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        offered[:] = sorted(tool.name for tool in info.function_tools)
        returned = [p for m in messages for p in m.parts if isinstance(p, ToolReturnPart)]
        if not returned:
            return ModelResponse(
                parts=[
                    ToolCallPart("echo", {"message": "from pydantic-ai"}),
                    ToolCallPart(FEDERATED_ECHO, {"message": "federated"}),
                ]
            )
        if not any(p.outcome == "retried" for p in returned):
            return ModelResponse(parts=[ToolCallPart("read_file", {"path": "missing.txt"})])
        return ModelResponse(parts=[TextPart("\n".join(str(p.content) for p in returned))])

    conclave: MCPToolset[None] = MCPToolset(
        f"{federated_stack.url}/mcp",
        headers={"Authorization": f"Bearer {token}"},
        log_level="warning",
    )
    agent = Agent(FunctionModel(model), toolsets=[conclave])
    with pytest.warns(UserWarning, match="negotiated a modern MCP session"):
        async with agent:
            result = await agent.run("Echo twice, then read a file")
    assert set(BUILT_INS) <= set(offered) and FEDERATED_ECHO in offered, offered
    from_echo, from_upstream, refusal = result.output.split("\n", 2)
    assert (from_echo, from_upstream) == ("from pydantic-ai", "federated")
    assert "NOT_FOUND" in refusal and "missing.txt" in refusal


async def test_the_fastmcp_client_calls_a_federated_tool_and_reads_its_resource(
    federated_stack: EmbeddedStack,
) -> None:
    token = _register(federated_stack, *BUILT_INS, f"{UPSTREAM_SOURCE}.*")
    async with FastMcpClient(f"{federated_stack.url}/mcp", auth=token) as client:
        names = [tool.name for tool in await client.list_tools()]
        assert set(BUILT_INS) <= set(names) and FEDERATED_ECHO in names, names
        answer = await client.call_tool(FEDERATED_ECHO, {"message": "through conclave"})
        assert answer.content[0].text == "through conclave"  # type: ignore[union-attr]
        resources = [str(resource.uri) for resource in await client.list_resources()]
        assert "notes://readme" in resources, resources
        (readme,) = await client.read_resource("notes://readme")
        assert readme.text == "upstream notes"  # type: ignore[union-attr]
        with pytest.raises(ToolError, match="TOOL_NOT_ALLOWED"):
            await client.call_tool("run_shell", {"command": "id"})


def test_mcp_inspector_cli_lists_and_calls_with_the_authorization_header(
    federated_stack: EmbeddedStack, inspector_bin: Path, tmp_path: Path
) -> None:
    token = _register(federated_stack, *BUILT_INS)
    path = os.pathsep.join([str(inspector_bin), os.environ.get("PATH", "")])
    env = _reader_env(federated_stack, tmp_path, PATH=path)
    base = [
        "mcp-inspector",
        "--cli",
        f"{federated_stack.url}/mcp",
        "--transport",
        "http",
        "--header",
        f"Authorization: Bearer {token}",
    ]
    listed = json.loads(_run([*base, "--method", "tools/list"], env, tmp_path).stdout)
    assert sorted(tool["name"] for tool in listed["tools"]) == BUILT_INS
    call = [*base, "--method", "tools/call", "--tool-name", "echo", "--tool-arg", "message=hi"]
    called = json.loads(_run(call, env, tmp_path).stdout)
    assert called["isError"] is False and called["content"] == [{"type": "text", "text": "hi"}]


def test_mcp_inspector_cli_shows_a_failing_call_s_error(
    federated_stack: EmbeddedStack, inspector_bin: Path, tmp_path: Path
) -> None:
    """A call with arguments that do not fit: the Inspector prints the tool's error result,
    with the SERF text saying what to fix. (It checks a result's `structuredContent` against
    the tool's `outputSchema`, an error's too, so an error must not break that schema.)"""
    token = _register(federated_stack, *BUILT_INS)
    path = os.pathsep.join([str(inspector_bin), os.environ.get("PATH", "")])
    env = _reader_env(federated_stack, tmp_path, PATH=path)
    argv = [
        *("mcp-inspector", "--cli", f"{federated_stack.url}/mcp"),
        *("--header", f"Authorization: Bearer {token}", "--method", "tools/call"),
        *("--tool-name", "echo", "--tool-arg", "text=hi"),
    ]
    # 5 is the Inspector's TOOL_ERROR exit: the tool answered isError (a schema error is 1).
    answer = json.loads(_run(argv, env, tmp_path, exit_code=5).stdout)
    assert answer["isError"] is True, answer
    (text,) = [block["text"] for block in answer["content"]]
    assert text.startswith("INVALID_ARGUMENTS") and "- message: Field required" in text, text


def _connect_examples() -> list[Block]:
    """docs/connect.md's blocks that this module runs (`tested-by` it, with an example name)."""
    this = str(Path(__file__).resolve().relative_to(CONNECT_PAGE.parents[1]))
    return [b for b in page_blocks(CONNECT_PAGE) if b.marked("tested-by") == [this]]


# Which client venv runs each example of docs/connect.md, by its example name.
EXAMPLE_ENVS = {"langchain_agent.py": "langchain", "openai_agents.py": "openai_agents"}


@pytest.mark.parametrize("block", _connect_examples(), ids=lambda b: b.example or b.where)
def test_the_connect_page_example_runs_as_written(
    block: Block,
    federated_stack: EmbeddedStack,
    client_env_python: Callable[[str], Path],
    inspector_bin: Path,
    tmp_path: Path,
) -> None:
    """A python example in its client's venv, a bash one with Inspector on PATH; each prints
    what its `expect` comments say."""
    assert block.example is not None, block.where
    path = os.pathsep.join([str(inspector_bin), os.environ.get("PATH", "")])
    env = _reader_env(federated_stack, tmp_path, PATH=path)
    if block.language == "python":
        script = tmp_path / block.example
        script.write_text(block.text)
        argv = [str(client_env_python(EXAMPLE_ENVS[block.example])), str(script)]
    else:
        argv = ["bash", "-euo", "pipefail", "-c", block.text]
    done = _run(argv, env, tmp_path)
    assert block.marked("expect"), f"{block.where}: nothing to expect"
    for text in block.marked("expect"):
        assert text in done.stdout, f"{block.where}: {text!r} not printed:\n{done.stdout}"


def test_the_connect_page_has_an_example_for_each_client_run_here() -> None:
    names = {block.example for block in _connect_examples()}
    assert names == {*EXAMPLE_ENVS, "inspector.sh"}, names

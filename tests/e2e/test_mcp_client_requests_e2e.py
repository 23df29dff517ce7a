"""A tool's MCP server asks the calling client (sampling, elicitation) through Conclave, over
real HTTP (gateways under uvicorn), for both remote source kinds.

The conformance suite's fixture server is federated twice: as the `mcp_http` source `fx` (in
a child process) and as the `mcp_stdio` source `fxs` (in the caller's own bwrap sandbox,
run by the host's interpreter, which has fastmcp). The official `mcp` client's
`sampling_callback` and `elicitation_callback` answer what the server asks mid-call, and the
server gets the answers. A client that did not declare elicitation is never sent one. A
response POSTed by another identity is refused; the gateway's request ids are its own. The
answer may reach another replica than the one running the call. A 2026-07-28 client (no
server-to-client requests on that wire) is asked in rounds instead: `InputRequiredResult`,
then its retry with `inputResponses` and the gateway's signed `requestState`, which another
identity or a changed state cannot use.

A read and a prompt ask the client too: the rounds fixture (`tools.harness.input_rounds_server`)
is federated as the `mcp_http` source `rt` (on the handshake era's wire) and as the
`mcp_stdio` source `rts`; its letter and its prompt ask who reads them, mid-request, and the
official client's answer reaches them, on either wire.
"""

from __future__ import annotations

import json
import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import ExitStack, asynccontextmanager
from typing import Any

import httpx
import httpx2
import pytest
from mcp import types
from mcp.client.client import Client
from mcp.client.streamable_http import streamable_http_client

from conclave.bench.core import running_child_server
from conclave.bench.mcp.conformance_suite import SANDBOX_FIXTURE, running_fixture
from conclave.stack import EmbeddedStack
from conclave.stack.ports import free_port
from tests.e2e.conftest import e2e_settings

pytestmark = pytest.mark.anyio

SOURCES = ("fx", "fxs")  # the fixture as mcp_http, and as mcp_stdio
ROUNDS_SOURCES = ("rt", "rts")  # the rounds fixture as mcp_http, and as mcp_stdio
ROUNDS_FIXTURE = "/opt/conclave/code/tools/harness/input_rounds_server.py"  # in a sandbox
STREAM = {"Accept": "application/json, text/event-stream"}
ELICITED = {"username": "ada", "email": "ada@example.org"}
ELICITATION_DONE = f"Elicitation completed: action=accept, content={json.dumps(ELICITED)}"


def _config(fixture_url: str, rounds_url: str) -> str:
    return (
        f'[[source]]\nname = "rt"\nkind = "mcp_http"\nurl = "{rounds_url}"\n'
        f'[[source]]\nname = "rts"\nkind = "mcp_stdio"\n'
        f'command = ["{sys.executable}", "{ROUNDS_FIXTURE}", "--stdio"]\n'
        "intent = { timeout_ms = 60000, memory_mb = 1024 }\n"
        f'[[source]]\nname = "fx"\nkind = "mcp_http"\nurl = "{fixture_url}"\n'
        "intent = { timeout_ms = 20000 }\n"
        f'[[source]]\nname = "fxs"\nkind = "mcp_stdio"\n'
        f'command = ["{sys.executable}", "{SANDBOX_FIXTURE}", "--stdio"]\n'
        "intent = { timeout_ms = 60000, memory_mb = 1024 }\n"
    )


@pytest.fixture(scope="module")
def replicas(
    redis_url: str, tmp_path_factory: pytest.TempPathFactory, bwrap_available: None
) -> Iterator[tuple[EmbeddedStack, EmbeddedStack]]:
    """Two gateways on one Redis, the fixture federated behind each."""
    port = free_port()
    rounds = ["tools.harness.input_rounds_server", "--port", str(port)]
    with running_fixture() as fixture_url, running_child_server(rounds, port):
        config = tmp_path_factory.mktemp("client-requests") / "conclave.toml"
        config.write_text(_config(fixture_url, f"http://127.0.0.1:{port}/mcp"))
        settings = e2e_settings(redis_url, "bwrap", config=config)
        with ExitStack() as stacks:
            # Each starts the stdio fixture once (fastmcp's import): seconds on a loaded box.
            first, second = EmbeddedStack(settings), EmbeddedStack(settings)
            for gateway in (first, second):
                gateway.start(timeout_s=180)
                stacks.callback(gateway.stop)
            yield first, second


def _token(stack: EmbeddedStack, agent: str) -> str:
    return stack.token("asked", agent, ["tool:*"])


class _Asked:
    """The client's side: what the server asked it, and what it answers."""

    def __init__(self) -> None:
        self.prompts: list[str] = []
        self.elicited: list[str] = []

    async def sample(
        self, context: Any, params: types.CreateMessageRequestParams
    ) -> types.CreateMessageResult:
        content = params.messages[0].content
        self.prompts.append(content.text if isinstance(content, types.TextContent) else "")
        text = types.TextContent(type="text", text="forty-two")
        return types.CreateMessageResult(role="assistant", content=text, model="scripted")

    async def elicit(self, context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        self.elicited.append(params.message)
        return types.ElicitResult(action="accept", content=ELICITED)


@asynccontextmanager
async def _client(
    stack: EmbeddedStack, asked: _Asked, mode: str = "legacy"
) -> AsyncIterator[Client]:
    """The official `mcp` client declaring sampling and elicitation: on the handshake era
    (`legacy`), or on the 2026-07-28 wire it picks by itself (`auto`)."""
    http = httpx2.AsyncClient(
        headers={"Authorization": f"Bearer {_token(stack, 'official')}"}, timeout=90
    )
    transport = streamable_http_client(f"{stack.url}/mcp", http_client=http)
    async with (
        http,
        Client(
            transport,
            mode=mode,  # type: ignore[arg-type]
            sampling_callback=asked.sample,
            elicitation_callback=asked.elicit,
        ) as client,
    ):
        yield client


def _text(result: types.CallToolResult) -> str:
    return "".join(c.text for c in result.content if isinstance(c, types.TextContent))


@pytest.mark.parametrize("mode", ["legacy", "auto"])
@pytest.mark.parametrize("source", SOURCES)
async def test_the_official_client_answers_what_the_tools_server_asks_it(
    replicas: tuple[EmbeddedStack, EmbeddedStack], source: str, mode: str
) -> None:
    """`legacy`: on the handshake era, mid-call; `auto`: on 2026-07-28, in rounds."""
    asked = _Asked()
    async with _client(replicas[0], asked, mode) as client:
        assert client.protocol_version == ("2026-07-28" if mode == "auto" else "2025-11-25")
        sampled = await client.call_tool(f"{source}__test_sampling", {"prompt": "six times seven?"})
        elicited = await client.call_tool(f"{source}__test_elicitation", {"message": "who?"})
    assert not sampled.is_error, _text(sampled)
    assert _text(sampled) == "LLM response: forty-two"
    assert asked.prompts == ["six times seven?"]
    assert not elicited.is_error, _text(elicited)
    assert _text(elicited) == ELICITATION_DONE
    assert asked.elicited == ["who?"]


class _Reader(_Asked):
    """A client that answers "ada" when asked who reads."""

    async def elicit(self, context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        self.elicited.append(params.message)
        return types.ElicitResult(action="accept", content={"name": "ada"})


@pytest.mark.parametrize("mode", ["legacy", "auto"])
@pytest.mark.parametrize("source", ROUNDS_SOURCES)
async def test_a_read_and_a_prompt_reach_the_client_with_what_their_server_asks(
    replicas: tuple[EmbeddedStack, EmbeddedStack], source: str, mode: str
) -> None:
    """`legacy`: the server's elicitation on the request's event stream; `auto`: in rounds."""
    asked = _Reader()
    async with _client(replicas[0], asked, mode) as client:
        read = await client.read_resource(f"conclave://{source}/rounds://letter/bob")
        prompt = await client.get_prompt(f"{source}__dedication", {"topic": "cats"})
    (letter,) = read.contents
    assert isinstance(letter, types.TextResourceContents), letter
    assert letter.text == "bob writes to ada"
    (message,) = prompt.messages
    assert isinstance(message.content, types.TextContent), message
    assert message.content.text == "Write about cats for ada"
    assert asked.elicited == ["Who reads this?", "Who reads this?"]


def _initialize(http: httpx.Client, token: str, capabilities: dict[str, Any]) -> dict[str, str]:
    """The headers of a handshake-era session declaring `capabilities`."""
    params = {
        "protocolVersion": "2025-11-25",
        "capabilities": capabilities,
        "clientInfo": {"name": "raw", "version": "1"},
    }
    message = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": params}
    headers = {"Authorization": f"Bearer {token}", **STREAM}
    answer = http.post("/mcp", json=message, headers=headers)
    assert answer.status_code == 200, answer.text
    session = answer.headers["mcp-session-id"]
    return {**headers, "Mcp-Session-Id": session, "MCP-Protocol-Version": "2025-11-25"}


def _events(lines: Iterator[str]) -> Iterator[dict[str, Any]]:
    for line in lines:
        if line.startswith("data: "):
            yield json.loads(line[6:])


def _call(tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    params = {"name": tool, "arguments": arguments}
    return {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}


@pytest.mark.parametrize("source", SOURCES)
def test_only_a_client_that_declared_elicitation_is_asked_for_it(
    replicas: tuple[EmbeddedStack, EmbeddedStack], source: str
) -> None:
    stack = replicas[0]
    call = _call(f"{source}__test_elicitation", {"message": "who?"})
    with httpx.Client(base_url=stack.url, timeout=90) as http:
        declared = _initialize(http, _token(stack, f"elicit-{source}"), {"elicitation": {}})
        with http.stream("POST", "/mcp", json=call, headers=declared) as answer:
            events = _events(answer.iter_lines())
            request = next(events)
            assert request["method"] == "elicitation/create"
            decline = {"jsonrpc": "2.0", "id": request["id"], "result": {"action": "decline"}}
            assert http.post("/mcp", json=decline, headers=declared).status_code == 202
            (declined,) = list(events)
        assert declined["result"]["isError"] is False
        silent = _initialize(http, _token(stack, f"no-elicit-{source}"), {"sampling": {}})
        answer = http.post("/mcp", json=call, headers=silent)
    streamed = answer.headers["content-type"].startswith("text/event-stream")
    said = list(_events(iter(answer.text.splitlines()))) if streamed else [answer.json()]
    assert [m.get("method") for m in said if "method" in m] == []  # no request, no notice
    (result,) = said
    assert result["id"] == 1 and result["result"]["isError"] is True
    assert "elicitation/create" in json.dumps(result["result"]["content"])


def test_a_read_waiting_on_the_client_is_stopped_by_its_cancel_notice(
    replicas: tuple[EmbeddedStack, EmbeddedStack],
) -> None:
    """The read runs on one replica; its `notifications/cancelled` is POSTed to the other."""
    first, second = replicas
    agent = f"cancels-{uuid.uuid4().hex[:6]}"
    params = {"uri": "conclave://rt/rounds://letter/bob"}
    read = {"jsonrpc": "2.0", "id": 7, "method": "resources/read", "params": params}
    with (
        httpx.Client(base_url=first.url, timeout=30) as on_first,
        httpx.Client(base_url=second.url, timeout=30) as on_second,
    ):
        headers = _initialize(on_first, _token(first, agent), {"elicitation": {}})
        with on_first.stream("POST", "/mcp", json=read, headers=headers) as answer:
            events = _events(answer.iter_lines())
            request = next(events)
            assert request["method"] == "elicitation/create"
            assert request["params"]["message"] == "Who reads this?"
            cancelled = {"requestId": 7, "reason": "the user closed the dialog"}
            notice = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": cancelled}
            assert on_second.post("/mcp", json=notice, headers=headers).status_code == 202
            (ended,) = list(events)  # at once, not when the question's time runs out
    assert ended["id"] == 7
    assert ended["error"]["data"]["code"] == "CANCELLED", ended


def test_an_answer_from_another_identity_is_refused_and_the_callers_own_reaches_the_server(
    replicas: tuple[EmbeddedStack, EmbeddedStack],
) -> None:
    """The call runs on one replica; both answers are POSTed to the other."""
    first, second = replicas
    caller, other = f"caller-{uuid.uuid4().hex[:6]}", f"other-{uuid.uuid4().hex[:6]}"
    with (
        httpx.Client(base_url=first.url, timeout=90) as on_first,
        httpx.Client(base_url=second.url, timeout=90) as on_second,
    ):
        headers = _initialize(on_first, _token(first, caller), {"elicitation": {}})
        intruder = _initialize(on_second, _token(second, other), {"elicitation": {}})
        call = _call("fx__test_elicitation", {"message": "who?"})
        with on_first.stream("POST", "/mcp", json=call, headers=headers) as answer:
            assert answer.headers["content-type"] == "text/event-stream"
            events = _events(answer.iter_lines())
            request = next(events)
            assert request["method"] == "elicitation/create"
            assert request["params"]["message"] == "who?"
            asked_id = request["id"]
            assert isinstance(asked_id, str) and asked_id.startswith("conclave-")
            reply = {"jsonrpc": "2.0", "id": asked_id}
            forged = {**reply, "result": {"action": "accept", "content": {"username": "eve"}}}
            refused = on_second.post("/mcp", json=forged, headers=intruder)
            assert refused.status_code == 400, refused.text
            assert refused.json()["error"]["data"]["code"] == "INVALID_REQUEST"
            own = {**reply, "result": {"action": "accept", "content": ELICITED}}
            second_headers = {**headers}  # the caller's own session, on the other replica
            accepted = on_second.post("/mcp", json=own, headers=second_headers)
            assert accepted.status_code == 202, accepted.text
            (result,) = list(events)
    assert result["id"] == 1
    assert result["result"]["isError"] is False
    (text,) = [c["text"] for c in result["result"]["content"] if c["type"] == "text"]
    assert text == ELICITATION_DONE


def test_a_2026_round_is_resumed_on_another_replica_by_its_caller_alone(
    replicas: tuple[EmbeddedStack, EmbeddedStack],
) -> None:
    """The first round on one replica, the retries on the other: a changed `requestState`
    and another identity's retry are refused, the caller's own gets the tool's result."""
    first, second = replicas
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}},
    }
    tool = "fx__test_elicitation"

    def call(request_id: int, **extra: Any) -> dict[str, Any]:
        params = {"name": tool, "arguments": {"message": "who?"}, "_meta": meta, **extra}
        return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}

    def headers(stack: EmbeddedStack, agent: str) -> dict[str, str]:
        wire = {"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call"}
        return {
            "Authorization": f"Bearer {_token(stack, agent)}",
            **STREAM,
            **wire,
            "Mcp-Name": tool,
        }

    caller = f"rounds-{uuid.uuid4().hex[:6]}"
    with (
        httpx.Client(base_url=first.url, timeout=90) as on_first,
        httpx.Client(base_url=second.url, timeout=90) as on_second,
    ):
        asking = on_first.post("/mcp", json=call(1), headers=headers(first, caller))
        assert asking.status_code == 200, asking.text
        round_one = asking.json()["result"]
        assert round_one["resultType"] == "input_required"
        ((key, request),) = round_one["inputRequests"].items()
        assert request["method"] == "elicitation/create"
        state = round_one["requestState"]
        answers = {key: {"action": "accept", "content": ELICITED}}
        changed = state[:-1] + ("0" if state[-1] != "0" else "1")
        for agent, sent in ((caller, changed), ("someone-else", state)):
            retry = call(2, requestState=sent, inputResponses=answers)
            refused = on_second.post("/mcp", json=retry, headers=headers(second, agent))
            assert refused.json()["error"]["data"]["code"] == "INVALID_REQUEST", refused.text
        retry = call(3, requestState=state, inputResponses=answers)
        done = on_second.post("/mcp", json=retry, headers=headers(second, caller))
    assert done.status_code == 200, done.text
    answer = done.json()
    assert answer["id"] == 3
    assert answer["result"]["resultType"] == "complete"
    (text,) = [c["text"] for c in answer["result"]["content"] if c["type"] == "text"]
    assert text == ELICITATION_DONE

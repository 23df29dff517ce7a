"""A remote A2A agent behind the gateway (`[[a2a_agent]]`), end to end: the gateway under
uvicorn in its own process, the agent (tests/a2a_test_agent.py, on the reference SDK) in
another server, callers over real HTTP with the reference SDK's client and plain JSON-RPC and
HTTP+JSON."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from a2a.client import ClientConfig, create_client
from a2a.helpers.proto_helpers import new_text_message
from a2a.types import Role, SendMessageRequest
from google.protobuf.json_format import MessageToDict

from agents import Agent, GatewayCallError, GatewayClient, ScriptedModel
from conclave.bench.a2a.echo_agent import running_agent
from conclave.stack import EmbeddedStack
from tests.e2e.conftest import e2e_settings

pytestmark = pytest.mark.anyio

A2A_VERSION = {"A2A-Version": "1.0"}


@pytest.fixture(scope="module")
def agent_url() -> Iterator[str]:
    with running_agent() as url:
        yield url


@pytest.fixture(scope="module")
def a2a_stack(
    redis_url: str, agent_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[EmbeddedStack]:
    config = Path(tmp_path_factory.mktemp("a2a")) / "conclave.toml"
    config.write_text(
        f'[[a2a_agent]]\nname = "echo"\nurl = "{agent_url}"\n\n'
        '[[a2a_agent]]\nname = "gone"\nurl = "http://127.0.0.1:9"\n'
    )
    settings = e2e_settings(redis_url, "process", config=config, max_body_bytes=4096)
    with EmbeddedStack(settings) as running:
        yield running


def _caller(stack: EmbeddedStack, scopes: list[str], tenant: str = "") -> httpx.AsyncClient:
    agent = f"a{uuid.uuid4().hex[:8]}"
    token = stack.token(tenant or f"t-{agent}", agent, scopes)
    headers = {"Authorization": f"Bearer {token}", **A2A_VERSION}
    return httpx.AsyncClient(base_url=stack.url, headers=headers, timeout=30)


def _send(text: str, method: str = "SendMessage", **message: Any) -> dict[str, Any]:
    parts = [{"text": text}]
    body = {"messageId": uuid.uuid4().hex, "role": "ROLE_USER", "parts": parts, **message}
    return {"jsonrpc": "2.0", "id": 1, "method": method, "params": {"message": body}}


def _rpc(method: str, **params: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": 7, "method": method, "params": params}


def _serf(details: list[dict[str, Any]]) -> dict[str, Any]:
    (serf,) = [d for d in details if d["@type"].endswith("conclave.SerfError")]
    return serf


def _reason(details: list[dict[str, Any]]) -> str:
    infos = [d for d in details if d["@type"].endswith("google.rpc.ErrorInfo")]
    return str(infos[0]["reason"]) if infos else ""


async def test_the_card_names_the_gateway_and_its_bearer_scheme(a2a_stack: EmbeddedStack) -> None:
    async with httpx.AsyncClient(base_url=a2a_stack.url) as http:  # discovery needs no token
        card = (await http.get("/a2a/echo/.well-known/agent-card.json")).json()
    assert card["name"] == "Echo" and card["skills"][0]["id"] == "echo"
    urls = {i["protocolBinding"]: i["url"] for i in card["supportedInterfaces"]}
    assert urls == {
        "JSONRPC": f"{a2a_stack.url}/a2a/echo",
        "HTTP+JSON": f"{a2a_stack.url}/a2a/echo/rest",
    }
    scheme = card["securitySchemes"]["conclave_bearer"]["httpAuthSecurityScheme"]
    assert scheme["scheme"] == "Bearer"
    assert card["securityRequirements"] == [{"schemes": {"conclave_bearer": {"list": []}}}]


async def test_the_reference_client_talks_to_the_agent_through_the_gateway(
    a2a_stack: EmbeddedStack,
) -> None:
    """The SDK's client reads the gateway's card, then sends over the interface it names
    (the gateway's), with the caller's token; the agent sees the caller, never the token."""
    agent = f"r{uuid.uuid4().hex[:8]}"
    token = a2a_stack.token(f"t-{agent}", agent, ["agent:echo"])
    async with httpx.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=30) as http:
        client = await create_client(
            f"{a2a_stack.url}/a2a/echo", ClientConfig(httpx_client=http, streaming=False)
        )
        request = SendMessageRequest(message=new_text_message("who", role=Role.ROLE_USER))
        answers = [MessageToDict(event) async for event in client.send_message(request)]
    (answer,) = answers
    text = answer["task"]["status"]["message"]["parts"][0]["text"]
    seen = json.loads(text)
    assert seen.pop("x-conclave-chain").startswith("v2.")  # signed, for it to pass on
    assert seen == {"x-conclave-tenant": f"t-{agent}", "x-conclave-agent": agent}


async def test_a_task_answers_only_to_the_identity_that_created_it(
    a2a_stack: EmbeddedStack,
) -> None:
    tenant = f"t-{uuid.uuid4().hex[:8]}"
    async with _caller(a2a_stack, ["agent:echo"], tenant) as owner:
        created = (await owner.post("/a2a/echo", json=_send("wait"))).json()
        task_id = created["result"]["task"]["id"]
        mine = await owner.post("/a2a/echo", json=_rpc("GetTask", id=task_id))
        assert mine.json()["result"]["status"]["state"] == "TASK_STATE_WORKING"
        listed = (await owner.post("/a2a/echo", json=_rpc("ListTasks"))).json()["result"]
        assert task_id in [t["id"] for t in listed["tasks"]]
        # Another identity of the same tenant, allowed to call the agent: it is not there.
        async with _caller(a2a_stack, ["agent:echo"], tenant) as other:
            got = (await other.post("/a2a/echo", json=_rpc("GetTask", id=task_id))).json()
            assert got["error"]["code"] == -32001
            assert _reason(got["error"]["data"]) == "TASK_NOT_FOUND"
            assert _serf(got["error"]["data"])["code"] == "NOT_FOUND"
            cancel = await other.post(f"/a2a/echo/rest/tasks/{task_id}:cancel", json={})
            assert cancel.status_code == 404, cancel.text
            assert _reason(cancel.json()["error"]["details"]) == "TASK_NOT_FOUND"
            resumed = await other.post("/a2a/echo", json=_send("more", taskId=task_id))
            assert resumed.json()["error"]["code"] == -32001
            theirs = (await other.post("/a2a/echo", json=_rpc("ListTasks"))).json()["result"]
            assert task_id not in [t["id"] for t in theirs["tasks"]]
        # Nothing the other tried reached the task: its owner still cancels it.
        cancelled = await owner.post(f"/a2a/echo/rest/tasks/{task_id}:cancel", json={})
        assert cancelled.status_code == 200, cancelled.text
        assert cancelled.json()["status"]["state"] == "TASK_STATE_CANCELED"


async def test_a_stream_relays_every_event_and_binds_its_task(a2a_stack: EmbeddedStack) -> None:
    async with _caller(a2a_stack, ["agent:echo"]) as owner:
        async with owner.stream(
            "POST", "/a2a/echo", json=_send("hello", "SendStreamingMessage")
        ) as stream:
            assert stream.headers["content-type"].startswith("text/event-stream")
            events = [
                json.loads(line[5:])["result"]
                async for line in stream.aiter_lines()
                if line.startswith("data:")
            ]
        task_id = events[0]["task"]["id"]
        final = events[-1]["statusUpdate"]["status"]
        assert final["state"] == "TASK_STATE_COMPLETED"
        assert final["message"]["parts"][0]["text"] == "echo: hello"
        got = await owner.get(f"/a2a/echo/rest/tasks/{task_id}")
        assert got.status_code == 200 and got.json()["id"] == task_id


async def test_refusals_are_a2a_errors_with_the_serf_envelope(a2a_stack: EmbeddedStack) -> None:
    async with _caller(a2a_stack, ["tool:*"]) as stranger:
        refused = await stranger.post("/a2a/echo", json=_send("hi"))
    assert refused.status_code == 403
    assert _serf(refused.json()["error"]["data"])["code"] == "AGENT_NOT_ALLOWED"
    async with _caller(a2a_stack, ["agent:*"]) as caller:
        unknown = await caller.post("/a2a/nobody", json=_send("hi"))
        assert unknown.status_code == 404
        assert _serf(unknown.json()["error"]["data"])["code"] == "NOT_FOUND"
        big = await caller.post("/a2a/echo", json=_send("x" * 10_000))
        assert big.status_code == 413
        assert _serf(big.json()["error"]["data"])["code"] == "PAYLOAD_TOO_LARGE"
        method = await caller.post("/a2a/echo", json=_rpc("message/send"))
        assert method.json()["error"]["code"] == -32601
        garbled = await caller.post("/a2a/echo", content=b"{not json")
        assert garbled.json()["error"]["code"] == -32700
        down = await caller.post("/a2a/gone", json=_send("hi"))
        serf = _serf(down.json()["error"]["data"])
        assert serf["code"] == "UPSTREAM_UNAVAILABLE" and serf["retryable"] is True
        route = await caller.get("/a2a/echo/rest/nowhere")
        assert route.status_code == 404
    async with httpx.AsyncClient(base_url=a2a_stack.url) as anonymous:
        no_token = await anonymous.post("/a2a/echo", json=_send("hi"))
    assert no_token.status_code == 401 and "Bearer" in no_token.headers["www-authenticate"]


async def test_every_request_is_audited_with_its_agent_and_method(
    a2a_stack: EmbeddedStack,
) -> None:
    async with _caller(a2a_stack, ["agent:echo"]) as caller:
        assert (await caller.post("/a2a/echo", json=_send("hi"))).status_code == 200
    async with httpx.AsyncClient(base_url=a2a_stack.url, timeout=30) as admin:
        records = (
            await admin.get(
                "/v1/audit",
                params={"operation": "a2a:SendMessage", "limit": 1000},
                headers=a2a_stack.admin_headers,
            )
        ).json()
    assert any(r["a2a_agent"] == "echo" and r["outcome"] == "ok" for r in records)


async def test_the_deadline_travels_to_the_agent_and_ends_the_request(
    a2a_stack: EmbeddedStack,
) -> None:
    async with _caller(a2a_stack, ["agent:echo"]) as caller:
        deadline = int(time.time() * 1000) + 10_000
        headers = {"X-Conclave-Deadline": str(deadline)}
        who = (await caller.post("/a2a/echo", json=_send("who"), headers=headers)).json()
        seen = json.loads(who["result"]["task"]["status"]["message"]["parts"][0]["text"])
        told = int(seen["x-conclave-deadline"])  # ATBA's share: the answer's margin less
        assert deadline - 1000 < told < deadline
        deadline = int(time.time() * 1000) + 600
        slow = await caller.post(
            "/a2a/echo", json=_send("sleep 5"), headers={"X-Conclave-Deadline": str(deadline)}
        )
        late_ms = time.time() * 1000 - deadline
    assert _serf(slow.json()["error"]["data"])["code"] == "DEADLINE_EXCEEDED", slow.text
    assert late_ms < 400, f"answered {late_ms:.0f} ms past the deadline"


async def test_a_push_url_inside_the_machine_is_refused(a2a_stack: EmbeddedStack) -> None:
    async with _caller(a2a_stack, ["agent:echo"]) as owner:
        task_id = (await owner.post("/a2a/echo", json=_send("wait"))).json()["result"]["task"]["id"]
        for url in ("http://127.0.0.1:8321/hook", "http://169.254.169.254/", "file:///etc/passwd"):
            refused = await owner.post(
                "/a2a/echo",
                json=_rpc("CreateTaskPushNotificationConfig", taskId=task_id, url=url),
            )
            assert _serf(refused.json()["error"]["data"])["code"] == "INVALID_ARGUMENTS", url
        # A public address reaches the agent, which keeps the config.
        public = await owner.post(
            f"/a2a/echo/rest/tasks/{task_id}/pushNotificationConfigs",
            json={"url": "http://93.184.216.34/hook"},
        )
        assert public.status_code == 200, public.text
        assert public.json()["url"] == "http://93.184.216.34/hook"


async def test_an_sdk_agent_delegates_and_a_failure_names_the_hop(
    a2a_stack: EmbeddedStack,
) -> None:
    """`Agent.delegate`: the answer as text, a task continued with its id, and the agent's
    own error raised as SERF naming the hop; a registration without the agent is refused."""
    async with GatewayClient(a2a_stack.url, admin_key="e2e-admin-key") as admin:
        planner = Agent(
            f"p{uuid.uuid4().hex[:8]}", "plans", ScriptedModel([]), tenant="t-sdk", agents=["echo"]
        )
        await planner.register(admin)
        reply = await planner.delegate("echo", "hi")
        assert (reply.text, reply.state) == ("echo: hi", "TASK_STATE_COMPLETED")
        asked = await planner.delegate("echo", "ask")
        assert asked.state == "TASK_STATE_INPUT_REQUIRED" and asked.text == "which one?"
        resumed = await planner.delegate("echo", "the first", task_id=asked.task_id)
        assert resumed.task_id == asked.task_id and resumed.text.endswith("echo: the first")
        with pytest.raises(GatewayCallError) as done_task:
            await planner.delegate("echo", "again", task_id=reply.task_id)  # completed
        assert done_task.value.serf.details["hop"] == "echo"
        loner = Agent(f"l{uuid.uuid4().hex[:8]}", "alone", ScriptedModel([]), tenant="t-sdk")
        await loner.register(admin)
        with pytest.raises(GatewayCallError) as refused:
            await loner.delegate("echo", "hi")
        assert refused.value.code == "AGENT_NOT_ALLOWED"
        await planner.aclose()
        await loner.aclose()

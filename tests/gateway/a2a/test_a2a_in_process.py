"""A2A through the in-process gateway (httpx's ASGI transport; a real Redis, the reference-SDK
agent in its own process behind `[[a2a_agent]]`, and a hosted agent served by hand over the
worker API): the remote proxy's methods over both bindings, and a hosted task's whole life,
checked from what the caller and the worker see. The e2e tests (tests/e2e/test_a2a_*.py) run
the same against the gateway under uvicorn; these keep the code measured in-process too."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from agents import GatewayCallError, GatewayClient, WorkItem, serve_a2a
from conclave.bench.a2a.echo_agent import running_agent
from gateway.config import Settings
from gateway.delegation import NO_CHAIN, ChainSigner, DelegationChain
from protocol import A2A_MAX_CHAIN, Principal
from tests.helpers import (
    admin_headers,
    in_process_gateway,
    registered_token,
    serf_in,
    until_true,
)

pytestmark = pytest.mark.anyio

A2A = {"A2A-Version": "1.0"}


@pytest.fixture(scope="module")
def agent_url() -> Iterator[str]:
    with running_agent() as url:
        yield url


@pytest.fixture
async def gateway(
    settings: Settings, agent_url: str, tmp_path: Path
) -> AsyncIterator[httpx.AsyncClient]:
    config = tmp_path / "conclave.toml"
    config.write_text(
        f'[[a2a_agent]]\nname = "echo"\nurl = "{agent_url}"\n\n'
        '[[a2a_agent]]\nname = "helper"\ntenant = "acme"\ndescription = "helps"\n\n'
        '[[a2a_agent]]\nname = "loose"\ntenant = "acme"\n\n'
        '[[a2a_agent]]\nname = "sealed"\ntenant = "acme"\nconfined = true\n\n'
        '[[a2a_agent]]\nname = "redo"\ntenant = "acme"\nidempotent = true\nlease_s = 0.3\n\n'
        # Policies see the chain: the helper echoes nothing it is asked to for t6's planner.
        '[[policy]]\nname = "not-for-t6"\ntenants = ["acme"]\nagents = ["helper"]\n'
        'tools = ["echo"]\nwhen = \'"t6/planner" in chain\'\noutcome = "deny"\n'
    )
    update = {"config": config, "sandbox_backend": "inprocess"}
    async with in_process_gateway(settings.model_copy(update=update)) as client:
        yield client


def _send(text: str, method: str = "SendMessage", **params: Any) -> dict[str, Any]:
    message = {"messageId": uuid.uuid4().hex, "role": "ROLE_USER", "parts": [{"text": text}]}
    return {"jsonrpc": "2.0", "id": 1, "method": method, "params": {"message": message, **params}}


def _rpc(method: str, **params: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": 2, "method": method, "params": params}


async def test_the_remote_proxy_over_both_bindings(
    gateway: httpx.AsyncClient, settings: Settings
) -> None:
    owner = await _registered(gateway, settings, "t1", "owner")
    other = await _registered(gateway, settings, "t1", "other")
    card = (await gateway.get("/a2a/echo/.well-known/agent-card.json")).json()
    assert {i["protocolBinding"] for i in card["supportedInterfaces"]} == {"JSONRPC", "HTTP+JSON"}
    etag = (await gateway.get("/a2a/echo/.well-known/agent-card.json")).headers["etag"]
    cached = await gateway.get(
        "/a2a/echo/.well-known/agent-card.json", headers={"If-None-Match": etag}
    )
    assert cached.status_code == 304
    task = (await gateway.post("/a2a/echo", json=_send("wait"), headers=owner)).json()
    task_id = task["result"]["task"]["id"]
    got = await gateway.get(f"/a2a/echo/rest/tasks/{task_id}", headers=owner)
    assert got.json()["status"]["state"] == "TASK_STATE_WORKING"
    listed = (await gateway.get("/a2a/echo/rest/tasks", headers=owner)).json()
    assert task_id in [t["id"] for t in listed["tasks"]]
    hidden = await gateway.post("/a2a/echo", json=_rpc("GetTask", id=task_id), headers=other)
    assert hidden.json()["error"]["code"] == -32001
    assert serf_in(hidden.json())[1] == "TASK_NOT_FOUND"
    streamed = await gateway.post(
        "/a2a/echo/rest/message:stream", json=_send("hi")["params"], headers=owner
    )
    assert streamed.headers["content-type"].startswith("text/event-stream")
    assert "echo: hi" in streamed.text
    refused = await gateway.post(
        "/a2a/echo",
        json=_rpc("CreateTaskPushNotificationConfig", taskId=task_id, url="http://10.0.0.1/x"),
        headers=owner,
    )
    assert serf_in(refused.json())[0]["code"] == "INVALID_ARGUMENTS"
    cancelled = await gateway.post(f"/a2a/echo/rest/tasks/{task_id}:cancel", json={}, headers=owner)
    assert cancelled.json()["status"]["state"] == "TASK_STATE_CANCELED"
    unknown = await gateway.post("/a2a/echo", json=_rpc("tasks/get"), headers=owner)
    assert unknown.json()["error"]["code"] == -32601
    nowhere = await gateway.get("/a2a/echo/rest/elsewhere", headers=owner)
    assert nowhere.status_code == 404 and serf_in(nowhere.json())[0]["code"] == "NOT_FOUND"


async def test_a_hosted_task_from_send_to_answer_through_the_worker_api(
    gateway: httpx.AsyncClient, settings: Settings
) -> None:
    caller = await _registered(gateway, settings, "t2", "asker", agents=["helper"])
    worker = await _registered(gateway, settings, "acme", "helper")
    stranger = await _registered(gateway, settings, "acme", "intruder")
    card = (await gateway.get("/a2a/helper/.well-known/agent-card.json")).json()
    assert card["skills"][0]["description"] == "helps"
    sent = await gateway.post(
        "/a2a/helper",
        json=_send("help me", configuration={"returnImmediately": True}),
        headers=caller,
    )
    task_id = sent.json()["result"]["task"]["id"]
    refused = await gateway.post("/v1/a2a/helper/work/next?wait_s=0", headers=stranger)
    assert refused.status_code == 403 and refused.json()["code"] == "AGENT_NOT_ALLOWED"
    claimed = await gateway.post("/v1/a2a/helper/work/next?wait_s=1", headers=worker)
    item = claimed.json()
    assert (item["task_id"], item["caller"]["agent"]) == (task_id, "asker")
    answer = {"messageId": "a1", "role": "ROLE_AGENT", "parts": [{"text": "helped"}]}
    update = {"token": item["token"], "state": "TASK_STATE_COMPLETED", "message": answer}
    acked = await gateway.post(f"/v1/a2a/helper/work/{task_id}", json=update, headers=worker)
    assert acked.status_code == 200, acked.text
    stale = await gateway.post(f"/v1/a2a/helper/work/{task_id}", json=update, headers=worker)
    assert stale.status_code == 409 and stale.json()["code"] == "FENCED"
    done = await gateway.post("/a2a/helper", json=_rpc("GetTask", id=task_id), headers=caller)
    status = done.json()["result"]["status"]
    assert status["state"] == "TASK_STATE_COMPLETED"
    assert status["message"]["parts"][0]["text"] == "helped"
    nothing = await gateway.post("/v1/a2a/helper/work/next?wait_s=0", headers=worker)
    assert nothing.status_code == 204


async def test_a_task_run_again_after_its_worker_died_holds_each_artifact_once(
    gateway: httpx.AsyncClient, settings: Settings
) -> None:
    """The first worker writes an artifact and goes quiet; past its lease the task goes to
    the next (the agent is idempotent), which writes the same artifact (its id is the same)
    and answers: the task holds that artifact once, and the answer's."""
    caller = await _registered(gateway, settings, "t10", "asker", agents=["redo"])
    worker = await _registered(gateway, settings, "acme", "redo")
    at_once = _send("go", configuration={"returnImmediately": True})
    task_id = (await gateway.post("/a2a/redo", json=at_once, headers=caller)).json()["result"][
        "task"
    ]["id"]
    first_part = {"artifactId": f"{task_id}-1", "parts": [{"text": "part 1"}]}
    for _run in range(2):  # the first worker's, then its successor's
        item = (await gateway.post("/v1/a2a/redo/work/next?wait_s=5", headers=worker)).json()
        assert item["task_id"] == task_id
        update = {"token": item["token"], "state": "TASK_STATE_WORKING", "artifact": first_part}
        written = await gateway.post(f"/v1/a2a/redo/work/{task_id}", json=update, headers=worker)
        assert written.status_code == 200, written.text
    last_part = {"artifactId": f"{task_id}-2", "parts": [{"text": "part 2"}]}
    update = {"token": item["token"], "state": "TASK_STATE_COMPLETED", "artifact": last_part}
    await gateway.post(f"/v1/a2a/redo/work/{task_id}", json=update, headers=worker)
    task = await gateway.post("/a2a/redo", json=_rpc("GetTask", id=task_id), headers=caller)
    assert [a["parts"][0]["text"] for a in task.json()["result"]["artifacts"]] == [
        "part 1",
        "part 2",
    ]


async def test_the_delegation_chain_travels_and_a_loop_or_a_forged_chain_is_refused(
    gateway: httpx.AsyncClient, settings: Settings
) -> None:
    caller = await _registered(gateway, settings, "t3", "planner", agents=["echo", "helper"])
    who = (await gateway.post("/a2a/echo", json=_send("who"), headers=caller)).json()
    seen = json.loads(who["result"]["task"]["status"]["message"]["parts"][0]["text"])
    chain = seen["x-conclave-chain"]  # what the agent would pass on, calling back through us
    signer = ChainSigner(_secret(settings))
    assert signer.read(chain).agents == ("echo",)
    assert signer.read(chain).acting_for == ("t3/planner",)
    back = await gateway.post(
        "/a2a/echo", json=_send("again"), headers={**caller, "X-Conclave-Chain": chain}
    )
    assert back.status_code == 403 and serf_in(back.json())[0]["code"] == "DELEGATION_LOOP"
    onward_ok = await gateway.post(
        "/a2a/helper",
        json=_send("go", configuration={"returnImmediately": True}),
        headers={**caller, "X-Conclave-Chain": chain},
    )
    assert onward_ok.status_code == 200, onward_ok.text  # echo -> helper: no loop
    forged = chain[:-1] + ("0" if chain[-1] != "0" else "1")
    tampered = await gateway.post(
        "/a2a/helper", json=_send("x"), headers={**caller, "X-Conclave-Chain": forged}
    )
    assert serf_in(tampered.json())[0]["code"] == "INVALID_REQUEST"
    deep: DelegationChain = NO_CHAIN
    someone = Principal(tenant="t3", agent="planner", expires_at=0, token_id="x")
    for hop in range(A2A_MAX_CHAIN - 1):
        deep = signer.read(signer.onward(deep, f"a{hop}", someone))
    too_deep = signer.onward(deep, f"a{A2A_MAX_CHAIN - 1}", someone)
    refused = await gateway.post(
        "/a2a/helper", json=_send("x"), headers={**caller, "X-Conclave-Chain": too_deep}
    )
    assert serf_in(refused.json())[0]["code"] == "DELEGATION_LOOP"


async def test_a_worker_delegating_for_its_task_carries_the_chain(
    gateway: httpx.AsyncClient, settings: Settings
) -> None:
    """The SDK's worker sends its task's chain with what it delegates: a hosted agent that
    delegates back to itself is refused DELEGATION_LOOP, not left to loop."""
    caller = await _registered(gateway, settings, "t4", "asker", agents=["helper"])
    worker_token = (await _registered(gateway, settings, "acme", "helper", agents=["helper"]))[
        "Authorization"
    ].removeprefix("Bearer ")
    transport = gateway._transport  # the in-process app
    async with GatewayClient("http://gateway", worker_token, transport=transport) as worker:

        async def delegate_to_myself(item: WorkItem) -> str:
            try:
                await worker.delegate("helper", f"again: {item.text}")
            except GatewayCallError as refused:
                return str(refused.code)
            return "it looped"

        stop = anyio.Event()
        async with anyio.create_task_group() as group:
            group.start_soon(lambda: serve_a2a(worker, "helper", delegate_to_myself, stop=stop))
            reply = await gateway.post("/a2a/helper", json=_send("start"), headers=caller)
            stop.set()
    text = reply.json()["result"]["task"]["status"]["message"]["parts"][0]["text"]
    assert text == "DELEGATION_LOOP"


@pytest.mark.parametrize(
    ("delegable", "outcomes"),
    [
        ([], "ok, POLICY_DENIED, POLICY_DENIED, TOOL_NOT_ALLOWED"),
        (["tool:run_python", "tool:run_shell"], "ok, ok, POLICY_DENIED, TOOL_NOT_ALLOWED"),
    ],
)
async def test_a_worker_does_for_its_caller_no_more_than_the_caller_may_hand_on(
    gateway: httpx.AsyncClient, settings: Settings, delegable: list[str], outcomes: str
) -> None:
    """The confused deputy: the planner may call echo only; the helper may call run_python
    and read namespace notes. Working on the planner's task, the helper may echo but not run
    Python nor read notes for it (POLICY_DENIED, the chain named), unless the operator lets
    the planner hand run_python on (its registration's `delegable`); on its own it may. What
    the planner may hand on never widens the helper's own grant (run_shell)."""
    caller = await _registered(
        gateway, settings, "t5", "planner", agents=["helper"], tools=["echo"], delegable=delegable
    )
    helper_rights = {"tools": ["echo", "run_python"], "namespaces": {"notes": "read"}}
    worker_token = (await _registered(gateway, settings, "acme", "helper", **helper_rights))[
        "Authorization"
    ].removeprefix("Bearer ")
    transport = gateway._transport
    refusals: list[Any] = []
    async with GatewayClient("http://gateway", worker_token, transport=transport) as worker:

        async def use_my_rights(item: WorkItem) -> str:
            outcome = []
            for attempt in (
                worker.call_tool("echo", {"message": "hi"}),
                worker.call_tool("run_python", {"code": "print(1)"}),
                worker.read("notes", "k"),
                worker.call_tool("run_shell", {"command": "true"}),
            ):
                try:
                    await attempt
                    outcome.append("ok")
                except GatewayCallError as refused:
                    refusals.append(refused.serf)
                    outcome.append(str(refused.code))
            return ", ".join(outcome)

        stop = anyio.Event()
        async with anyio.create_task_group() as group:
            group.start_soon(lambda: serve_a2a(worker, "helper", use_my_rights, stop=stop))
            reply = await gateway.post("/a2a/helper", json=_send("go"), headers=caller)
            stop.set()
        on_its_own = await worker.call_tool("run_python", {"code": "print(1)"})
    text = reply.json()["result"]["task"]["status"]["message"]["parts"][0]["text"]
    assert text == outcomes
    denied = [r for r in refusals if r.code == "POLICY_DENIED"]
    assert all(r.details["chain"] == ["t5/planner"] for r in denied)
    assert [r.details["grant"] for r in denied] == [
        *([] if delegable else ["tool:run_python"]),
        "state:notes:read",
    ]
    assert on_its_own.result["stdout"] == "1\n"


@pytest.mark.parametrize(
    ("agent", "outcomes"),
    [
        ("loose", "ok, POLICY_DENIED, ok, ok"),
        ("sealed", "ok, POLICY_DENIED, POLICY_DENIED, POLICY_DENIED"),
    ],
)
async def test_a_worker_whose_code_drops_the_chain_still_works_within_its_callers_grant(
    gateway: httpx.AsyncClient, settings: Settings, agent: str, outcomes: str
) -> None:
    """The confused deputy when the agent's code sends no chain header: the planner may call
    echo and hand on nothing more; the agent may call echo and run_python. With the task
    token its worker got with the task, a bare HTTP client's calls act for the planner's
    chain all the same (run_python: POLICY_DENIED). The agent's own token acts for itself
    (run_python runs), unless the agent is declared `confined`: then it only serves its
    tasks, and anything else it asks is POLICY_DENIED."""
    caller = await _registered(gateway, settings, "t9", "planner", agents=[agent], tools=["echo"])
    rights = {"tools": ["echo", "run_python"]}
    agent_token = (await _registered(gateway, settings, "acme", agent, **rights))[
        "Authorization"
    ].removeprefix("Bearer ")
    transport = gateway._transport
    async with (
        GatewayClient("http://gateway", agent_token, transport=transport) as worker,
        httpx.AsyncClient(transport=transport, base_url="http://gateway") as bare,
    ):

        async def call_without_the_chain(item: WorkItem) -> str:
            outcome = []
            for token in (item.task_token, agent_token):
                for tool, arguments in (("echo", {"message": "hi"}), ("run_python", {"code": "1"})):
                    answer = await bare.post(
                        f"/v1/tools/{tool}/call",
                        json={"arguments": arguments},
                        headers={"Authorization": f"Bearer {token}"},
                    )
                    outcome.append("ok" if answer.status_code == 200 else answer.json()["code"])
            return ", ".join(outcome)

        stop = anyio.Event()
        async with anyio.create_task_group() as group:
            group.start_soon(lambda: serve_a2a(worker, agent, call_without_the_chain, stop=stop))
            reply = await gateway.post(f"/a2a/{agent}", json=_send("go"), headers=caller)
            stop.set()
    assert reply.json()["result"]["task"]["status"]["message"]["parts"][0]["text"] == outcomes


async def test_the_audit_and_policies_see_whom_a_worker_acts_for(
    gateway: httpx.AsyncClient, settings: Settings
) -> None:
    """The helper's calls for the planner's task are audited with the chain, and a policy
    whose condition reads `chain` refuses them there, not when the helper acts for itself."""
    caller = await _registered(gateway, settings, "t6", "planner", agents=["helper"], tools=["*"])
    worker_token = (await _registered(gateway, settings, "acme", "helper", tools=["echo"]))[
        "Authorization"
    ].removeprefix("Bearer ")
    transport = gateway._transport
    async with GatewayClient("http://gateway", worker_token, transport=transport) as worker:

        async def echo_for_the_caller(item: WorkItem) -> str:
            try:
                await worker.call_tool("echo", {"message": item.text})
            except GatewayCallError as refused:
                return f"{refused.code}: {refused.serf.details}"
            return "echoed"

        stop = anyio.Event()
        async with anyio.create_task_group() as group:
            group.start_soon(lambda: serve_a2a(worker, "helper", echo_for_the_caller, stop=stop))
            reply = await gateway.post("/a2a/helper", json=_send("hi"), headers=caller)
            stop.set()
        on_its_own = await worker.call_tool("echo", {"message": "mine"})
    text = reply.json()["result"]["task"]["status"]["message"]["parts"][0]["text"]
    assert text.startswith("POLICY_DENIED") and "not-for-t6" in text
    assert on_its_own.result == "mine"
    audit = await gateway.get(
        "/v1/audit", params={"tenant": "acme", "agent": "helper", "tool": "echo"},
        headers=admin_headers(settings),
    )  # fmt: skip
    chains = [(r["code"], r["chain"]) for r in audit.json()]
    assert ("POLICY_DENIED", ["t6/planner"]) in chains and ("", []) in chains
    sent = await gateway.get(
        "/v1/audit", params={"tenant": "t6", "agent": "planner"}, headers=admin_headers(settings)
    )
    assert [r["chain"] for r in sent.json() if r["a2a_agent"] == "helper"] == [[]]


async def test_a_tenants_live_delegated_tasks_are_bounded(
    settings: Settings, tmp_path: Path
) -> None:
    """Two live tasks per tenant: the third is RATE_LIMITED with a wait to retry after, on
    both bindings; another tenant is not held back; a task's end gives its place back."""
    config = tmp_path / "conclave.toml"
    config.write_text('[[a2a_agent]]\nname = "queued"\ntenant = "acme"\n')
    update = {"config": config, "sandbox_backend": "inprocess", "a2a_tenant_tasks_max": 2}
    async with in_process_gateway(settings.model_copy(update=update)) as gateway:
        first = await _registered(gateway, settings, "t7", "one", agents=["queued"])
        second = await _registered(gateway, settings, "t7", "two", agents=["queued"])
        elsewhere = await _registered(gateway, settings, "t8", "one", agents=["queued"])
        later = _send("later", configuration={"returnImmediately": True})
        created = [
            (await gateway.post("/a2a/queued", json=later, headers=who)).json()["result"]["task"]
            for who in (first, second)
        ]
        refused = await gateway.post("/a2a/queued", json=later, headers=second)
        serf, _ = serf_in(refused.json())
        assert refused.status_code == 429 and serf["code"] == "RATE_LIMITED"
        assert serf["retry_after_ms"] == 1000 and serf["details"] == {"live_tasks": 2, "bound": 2}
        over_rest = await gateway.post("/a2a/queued/rest/message:send", json=later["params"],
                                       headers=first)  # fmt: skip
        assert over_rest.status_code == 429
        other = await gateway.post("/a2a/queued", json=later, headers=elsewhere)
        assert other.json()["result"]["task"]["status"]["state"] == "TASK_STATE_SUBMITTED"
        cancel = _rpc("CancelTask", id=created[0]["id"])
        await gateway.post("/a2a/queued", json=cancel, headers=first)
        again = await gateway.post("/a2a/queued", json=later, headers=second)
        assert again.json()["result"]["task"]["status"]["state"] == "TASK_STATE_SUBMITTED"


async def test_a_call_made_for_a_task_that_ended_is_cancelled_as_it_starts(
    gateway: httpx.AsyncClient, settings: Settings
) -> None:
    """A worker that has not yet learnt that its task was cancelled calls a tool for it: the
    call is CANCELLED before it runs, naming the task; without the chain it runs."""
    caller = await _registered(gateway, settings, "t9", "asker", agents=["helper"], tools=["*"])
    worker = await _registered(gateway, settings, "acme", "helper", tools=["echo"])
    sent = _send("soon cancelled", configuration={"returnImmediately": True})
    task_id = (await gateway.post("/a2a/helper", json=sent, headers=caller)).json()["result"][
        "task"
    ]["id"]
    claimed = (await gateway.post("/v1/a2a/helper/work/next?wait_s=1", headers=worker)).json()
    assert claimed["task_id"] == task_id
    for_the_task = {**worker, "X-Conclave-Chain": claimed["caller"]["chain"]}
    echo = {"arguments": {"message": "hi"}}
    before = await gateway.post("/v1/tools/echo/call", json=echo, headers=for_the_task)
    assert before.status_code == 200, before.text
    await gateway.post("/a2a/helper", json=_rpc("CancelTask", id=task_id), headers=caller)

    async def refused() -> dict[str, Any] | None:
        after = await gateway.post("/v1/tools/echo/call", json=echo, headers=for_the_task)
        return after.json() if after.status_code != 200 else None

    serf = await until_true(refused, 5)
    assert serf["code"] == "CANCELLED" and f"helper/{task_id}" in serf["message"]
    alone = await gateway.post("/v1/tools/echo/call", json=echo, headers=worker)
    assert alone.status_code == 200


async def test_a_remote_agents_task_delegated_for_a_hosted_task_is_cancelled_with_it(
    gateway: httpx.AsyncClient, settings: Settings
) -> None:
    """The helper's worker delegates to the remote echo agent, whose task stays open; the
    caller cancels the helper's task: the gateway sends the echo agent CancelTask for the task
    done for it, and the worker's wait on it ends."""
    caller = await _registered(gateway, settings, "t10", "asker", agents=["helper"])
    helper = await _registered(gateway, settings, "acme", "helper", agents=["echo"])
    token = helper["Authorization"].removeprefix("Bearer ")
    waiting, stopped = anyio.Event(), anyio.Event()
    transport = gateway._transport
    async with GatewayClient("http://gateway", token, transport=transport) as worker:

        async def delegate_and_wait(item: WorkItem) -> str:
            waiting.set()
            try:
                return (await worker.delegate("echo", "wait")).text
            finally:
                stopped.set()

        stop = anyio.Event()
        async with anyio.create_task_group() as group:
            group.start_soon(lambda: serve_a2a(worker, "helper", delegate_and_wait, stop=stop))
            sent = _send("go", configuration={"returnImmediately": True})
            task_id = (await gateway.post("/a2a/helper", json=sent, headers=caller)).json()[
                "result"
            ]["task"]["id"]
            with anyio.fail_after(10):
                await waiting.wait()

            async def echo_task() -> dict[str, Any] | None:
                listed = await gateway.post("/a2a/echo", json=_rpc("ListTasks"), headers=helper)
                tasks = listed.json()["result"]["tasks"]
                return tasks[0] if tasks else None

            delegated = await until_true(echo_task, 10)
            assert delegated["status"]["state"] == "TASK_STATE_WORKING"
            await gateway.post("/a2a/helper", json=_rpc("CancelTask", id=task_id), headers=caller)

            async def cancelled_there() -> bool:
                got = await gateway.post(
                    "/a2a/echo", json=_rpc("GetTask", id=delegated["id"]), headers=helper
                )
                return bool(got.json()["result"]["status"]["state"] == "TASK_STATE_CANCELED")

            await until_true(cancelled_there, 10)
            with anyio.fail_after(10):
                await stopped.wait()
            stop.set()


def _secret(settings: Settings) -> bytes:
    return settings.secret.get_secret_value().encode()


async def _registered(
    client: httpx.AsyncClient, settings: Settings, tenant: str, agent: str, **rights: Any
) -> dict[str, str]:
    rights.setdefault("agents", ["echo"])
    token = await registered_token(client, admin_headers(settings), tenant, agent, **rights)
    return {"Authorization": f"Bearer {token}", **A2A}

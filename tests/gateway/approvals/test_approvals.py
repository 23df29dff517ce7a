"""Approvals (issue 42): a call an `approve` rule holds waits for a person, on the replica it
came to, and is released (or refused) by a decision made on another replica; exactly the
approved arguments run; expiry, denial, self-approval and approvals on someone's behalf."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from redis.asyncio import Redis

from gateway.config import Settings
from gateway.delegation import NO_CHAIN, ChainSigner
from protocol import CHAIN_HEADER, DEADLINE_HEADER, ErrorCode, Principal
from tests.helpers import admin_headers, in_process_replicas, registered_token, until, until_true

pytestmark = pytest.mark.anyio

RULE = """
[[policy]]
name = "big-echo"
tools = ["echo"]
when = "size(args.message) > 3"
outcome = "approve"
reason = "long messages need a person"
approval_ttl_s = 60
"""


@asynccontextmanager
async def two_replicas(
    settings: Settings, tmp_path: Path
) -> AsyncIterator[tuple[httpx.AsyncClient, httpx.AsyncClient]]:
    """Two gateway replicas on one Redis, each with conclave.toml's approve rule."""
    config = tmp_path / "conclave.toml"
    config.write_text(RULE)
    settings = settings.model_copy(update={"config": config, "sandbox_backend": "inprocess"})
    async with in_process_replicas(settings) as (first, second):
        yield first, second


async def bearer_of(
    client: httpx.AsyncClient, settings: Settings, agent: str, **rights: Any
) -> dict[str, str]:
    token = await registered_token(client, admin_headers(settings), "acme", agent, **rights)
    return {"Authorization": f"Bearer {token}"}


def deadline_in(in_s: float) -> dict[str, str]:
    return {DEADLINE_HEADER: str(int((time.time() + in_s) * 1000))}


async def pending(client: httpx.AsyncClient, approver: dict[str, str], n: int = 1) -> list[Any]:
    async def listed() -> list[Any]:
        answer = await client.get("/v1/approvals", headers=approver)
        assert answer.status_code == 200, answer.text
        found: list[Any] = answer.json()["approvals"]
        return found if len(found) >= n else []

    return await until_true(listed, 5.0)


async def held_call(
    a: httpx.AsyncClient,
    caller: dict[str, str],
    arguments: dict[str, Any],
    answers: list[httpx.Response],
    deadline_s: float = 10.0,
) -> None:
    answer = await a.post(
        "/v1/tools/echo/call",
        json={"arguments": arguments},
        headers={**caller, **deadline_in(deadline_s)},
    )
    answers.append(answer)


async def test_approved_on_one_replica_the_call_runs_on_the_other_with_the_arguments_shown(
    settings: Settings, redis: Redis, tmp_path: Path
) -> None:
    async with two_replicas(settings, tmp_path) as (a, b):
        caller = await bearer_of(a, settings, "payer", tools=["echo"])
        approver = await bearer_of(a, settings, "bob", approves=["echo"])
        short = await a.post("/v1/tools/echo/call", json={"arguments": {"message": "hi"}},
                             headers=caller)  # fmt: skip
        assert short.status_code == 200  # the rule's condition does not hold: no approval
        answers: list[httpx.Response] = []
        async with anyio.create_task_group() as group:
            group.start_soon(held_call, a, caller, {"message": "pay 5000"}, answers)
            [held] = await pending(b, approver)
            assert held["agent"] == "payer" and held["tool"] == "echo"
            assert held["arguments"] == {"message": "pay 5000"} and held["policy"] == "big-echo"
            assert held["reason"] == "long messages need a person"
            assert not answers  # still waiting
            decided = await b.post(f"/v1/approvals/{held['id']}/approve",
                                   json={"note": "known payee"}, headers=approver)  # fmt: skip
        assert decided.status_code == 200, decided.text
        assert decided.json()["status"] == "approved"
        assert decided.json()["decided_by"] == "acme/bob"
        [answer] = answers
        assert answer.status_code == 200, answer.text
        assert answer.json()["result"] == "pay 5000"
        shown = await a.get(f"/v1/approvals/{held['id']}", headers=approver)
        assert shown.json()["note"] == "known payee" and shown.json()["status"] == "approved"
        assert (await b.get("/v1/approvals", headers=approver)).json()["approvals"] == []
        again = await b.post(f"/v1/approvals/{held['id']}/deny", headers=approver)
        assert again.status_code == 400 and "approved by acme/bob" in again.json()["message"]


async def test_a_denied_call_is_refused_with_the_note_and_not_retryable(
    settings: Settings, redis: Redis, tmp_path: Path
) -> None:
    async with two_replicas(settings, tmp_path) as (a, b):
        caller = await bearer_of(a, settings, "payer", tools=["echo"])
        approver = await bearer_of(a, settings, "bob", approves=["ec*"])
        answers: list[httpx.Response] = []
        async with anyio.create_task_group() as group:
            group.start_soon(held_call, a, caller, {"message": "wire it all"}, answers)
            [held] = await pending(b, approver)
            await b.post(f"/v1/approvals/{held['id']}/deny",
                         json={"note": "not to that account"}, headers=approver)  # fmt: skip
        [answer] = answers
        assert answer.status_code == 403
        body = answer.json()
        assert body["code"] == ErrorCode.APPROVAL_DENIED and body["retryable"] is False
        assert "not to that account" in body["message"]
        assert body["details"]["note"] == "not to that account"
        assert body["details"]["decided_by"] == "acme/bob"


async def test_changed_arguments_are_a_new_approval_and_each_approval_runs_once(
    settings: Settings, redis: Redis, tmp_path: Path
) -> None:
    async with two_replicas(settings, tmp_path) as (a, b):
        caller = await bearer_of(a, settings, "payer", tools=["echo"])
        approver = await bearer_of(a, settings, "bob", approves=["echo"])
        answers: list[httpx.Response] = []
        async with anyio.create_task_group() as group:
            group.start_soon(held_call, a, caller, {"message": "pay 100"}, answers)
            [first] = await pending(b, approver)
            group.start_soon(held_call, a, caller, {"message": "pay 100000"}, answers)
            both = await pending(b, approver, 2)
            second = next(h for h in both if h["id"] != first["id"])
            assert second["arguments"] == {"message": "pay 100000"}
            assert second["digest"] != first["digest"]
            await b.post(f"/v1/approvals/{first['id']}/approve", headers=approver)
            await until(lambda: len(answers) == 1, 5.0)
            assert [r.json()["result"] for r in answers] == ["pay 100"]  # only the one shown
            await b.post(f"/v1/approvals/{second['id']}/deny", headers=approver)
        assert answers[1].json()["code"] == ErrorCode.APPROVAL_DENIED
        answers.clear()
        async with anyio.create_task_group() as group:  # the same arguments again: asked again
            group.start_soon(held_call, a, caller, {"message": "pay 100"}, answers)
            [third] = await pending(b, approver)
            assert third["id"] != first["id"] and third["digest"] == first["digest"]
            await b.post(f"/v1/approvals/{third['id']}/approve", headers=approver)
        assert answers[0].json()["result"] == "pay 100"


async def test_nobody_deciding_before_the_deadline_is_approval_expired(
    settings: Settings, redis: Redis, tmp_path: Path
) -> None:
    async with two_replicas(settings, tmp_path) as (a, b):
        caller = await bearer_of(a, settings, "payer", tools=["echo"])
        approver = await bearer_of(a, settings, "bob", approves=["echo"])
        answers: list[httpx.Response] = []
        began = time.monotonic()
        async with anyio.create_task_group() as group:
            group.start_soon(held_call, a, caller, {"message": "pay late"}, answers, 1.0)
            [held] = await pending(b, approver)
        waited = time.monotonic() - began
        [answer] = answers
        assert answer.status_code == 410, answer.text
        assert answer.json()["code"] == ErrorCode.APPROVAL_EXPIRED
        assert "deadline passed" in answer.json()["message"]
        assert 0.8 < waited < 2.0  # held until its deadline, not past it
        late = await b.post(f"/v1/approvals/{held['id']}/approve", headers=approver)
        assert late.status_code == 410 and late.json()["code"] == ErrorCode.APPROVAL_EXPIRED
        shown = await b.get(f"/v1/approvals/{held['id']}", headers=approver)
        assert shown.json()["status"] == "expired" and shown.json()["decided_by"] == ""


async def test_no_identity_approves_its_own_call_or_one_made_on_its_behalf(
    settings: Settings, redis: Redis, tmp_path: Path
) -> None:
    async with two_replicas(settings, tmp_path) as (a, b):
        # The caller may approve echo calls itself, and acts for the user alice.
        caller = await bearer_of(a, settings, "payer", tools=["echo"], approves=["*"], obo="alice")
        alice = await bearer_of(a, settings, "alice", approves=["echo"])
        for_alice = await bearer_of(a, settings, "assistant", approves=["echo"], obo="alice")
        stranger = await bearer_of(a, settings, "carol", tools=["echo"])  # no approve grant
        bob = await bearer_of(a, settings, "bob", approves=["echo"])
        answers: list[httpx.Response] = []
        async with anyio.create_task_group() as group:
            group.start_soon(held_call, a, caller, {"message": "pay myself"}, answers)
            [held] = await pending(b, bob)
            path = f"/v1/approvals/{held['id']}/approve"
            own = await b.post(path, headers=caller)
            assert own.status_code == 403 and own.json()["code"] == "PERMISSION_DENIED"
            assert "your own call" in own.json()["message"]
            for who in (alice, for_alice):
                refused = await b.post(path, headers=who)
                assert refused.status_code == 403, refused.text
                assert "on behalf of alice" in refused.json()["message"]
            assert (await b.get("/v1/approvals", headers=stranger)).json()["approvals"] == []
            assert (await b.post(path, headers=stranger)).status_code == 404
            assert not answers  # none of them released it
            assert (await b.post(path, headers=bob)).status_code == 200
        assert answers[0].status_code == 200 and answers[0].json()["result"] == "pay myself"


async def _mcp(
    client: httpx.AsyncClient, caller: dict[str, str], method: str, params: dict[str, Any]
) -> dict[str, Any]:
    """One message of the 2026-07-28 wire, declaring the tasks extension; its result."""
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {
            "extensions": {"io.modelcontextprotocol/tasks": {}}
        },
    }
    name = params.get("name", params.get("taskId"))
    headers = {**caller, "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": method,
               "Mcp-Name": str(name)}  # fmt: skip
    message = {"jsonrpc": "2.0", "id": 1, "method": method, "params": {**params, "_meta": meta}}
    answer = await client.post("/mcp", json=message, headers=headers)
    assert answer.status_code == 200, answer.text
    result: dict[str, Any] = answer.json()["result"]
    return result


async def test_an_mcp_task_shows_input_required_while_held_and_completes_once_approved(
    settings: Settings, redis: Redis, tmp_path: Path
) -> None:
    tasks_for_all = settings.model_copy(update={"task_long_running_ms": 1000})  # echo: 2 s
    async with two_replicas(tasks_for_all, tmp_path) as (a, b):
        caller = await bearer_of(a, settings, "payer", tools=["echo"])
        approver = await bearer_of(a, settings, "bob", approves=["echo"])
        call = {"name": "echo", "arguments": {"message": "pay 5000"}}
        created = await _mcp(a, caller, "tools/call", call)  # answered at once: a task
        assert created["resultType"] == "task", created
        task = {"taskId": created["taskId"]}

        async def held() -> dict[str, Any]:
            found = await _mcp(b, caller, "tasks/get", task)
            return found if found["status"] == "input_required" else {}

        waiting = await until_true(held, 5.0)
        [approval] = await pending(b, approver)
        assert f"waiting for approval {approval['id']}" in waiting["statusMessage"]
        assert "big-echo" in waiting["statusMessage"]
        await b.post(f"/v1/approvals/{approval['id']}/approve", headers=approver)

        async def ended() -> dict[str, Any]:
            found = await _mcp(b, caller, "tasks/get", task)
            return found if found["status"] not in ("working", "input_required") else {}

        done = await until_true(ended, 5.0)
        assert done["status"] == "completed", done
        assert done["result"]["content"][0]["text"] == "pay 5000"


async def test_a_denied_mcp_task_fails_with_the_note(
    settings: Settings, redis: Redis, tmp_path: Path
) -> None:
    tasks_for_all = settings.model_copy(update={"task_long_running_ms": 1000})
    async with two_replicas(tasks_for_all, tmp_path) as (a, b):
        caller = await bearer_of(a, settings, "payer", tools=["echo"])
        approver = await bearer_of(a, settings, "bob", approves=["echo"])
        call = {"name": "echo", "arguments": {"message": "pay everything"}}
        task = {"taskId": (await _mcp(a, caller, "tools/call", call))["taskId"]}
        [approval] = await pending(b, approver)
        await b.post(f"/v1/approvals/{approval['id']}/deny", json={"note": "no"},
                     headers=approver)  # fmt: skip

        async def ended() -> dict[str, Any]:
            found = await _mcp(b, caller, "tasks/get", task)
            return found if found["status"] not in ("working", "input_required") else {}

        done = await until_true(ended, 5.0)
        assert done["status"] == "failed", done
        assert done["error"]["data"]["code"] == "APPROVAL_DENIED"
        assert done["error"]["data"]["details"]["note"] == "no"


async def test_a_revoked_tokens_call_is_refused_not_shown_to_approvers(
    settings: Settings, redis: Redis, tmp_path: Path
) -> None:
    async with two_replicas(settings, tmp_path) as (a, b):
        old = await bearer_of(a, settings, "payer", tools=["echo"])
        await bearer_of(a, settings, "payer", tools=["echo"])  # registered again: old revoked
        approver = await bearer_of(a, settings, "bob", approves=["echo"])
        refused = await a.post("/v1/tools/echo/call", json={"arguments": {"message": "pay 9"}},
                               headers=old)  # fmt: skip
        assert refused.status_code == 401 and refused.json()["code"] == "AUTH_REVOKED"
        assert (await b.get("/v1/approvals", headers=approver)).json()["approvals"] == []


async def test_a_call_made_for_a_delegator_is_not_approved_by_that_delegator(
    settings: Settings, redis: Redis, tmp_path: Path
) -> None:
    async with two_replicas(settings, tmp_path) as (a, b):
        worker = await bearer_of(a, settings, "worker", tools=["echo"])
        planner = await bearer_of(a, settings, "planner", tools=["echo"], approves=["echo"])
        bob = await bearer_of(a, settings, "bob", approves=["echo"])
        # The planner delegated to the worker: the gateway signed the chain it handed on.
        delegator = Principal(tenant="acme", agent="planner", scopes=("tool:echo",),
                              expires_at=2**31, token_id="p")  # fmt: skip
        signer = ChainSigner(settings.secret.get_secret_value().encode())
        chain = {CHAIN_HEADER: signer.onward(NO_CHAIN, "worker", delegator)}
        answers: list[httpx.Response] = []
        async with anyio.create_task_group() as group:
            group.start_soon(held_call, a, {**worker, **chain}, {"message": "pay 5000"}, answers)
            [held] = await pending(b, bob)
            assert held["chain"] == ["acme/planner"] and held["agent"] == "worker"
            path = f"/v1/approvals/{held['id']}/approve"
            refused = await b.post(path, headers=planner)
            assert refused.status_code == 403
            assert "on behalf of acme/planner" in refused.json()["message"]
            assert (await b.post(path, headers=bob)).status_code == 200
        assert answers[0].status_code == 200 and answers[0].json()["result"] == "pay 5000"

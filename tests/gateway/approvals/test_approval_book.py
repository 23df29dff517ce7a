"""`gateway.approvals` on a real Redis, below HTTP: who may decide a held call, what a caller
that leaves or nobody deciding does to its approval (test_approvals.py beside it drives the
same through two replicas)."""

from __future__ import annotations

import time
from typing import Any

import anyio
import pytest
from redis.asyncio import Redis

from gateway.approvals import ApprovalBook, HeldCall, HeldCalls, arguments_digest
from gateway.gateway_error import GatewayError
from protocol import ErrorCode, PolicyRule, Principal
from tests.helpers import until, until_true

pytestmark = pytest.mark.anyio


def _principal(agent: str, *scopes: str, obo: str | None = None) -> Principal:
    return Principal(tenant="acme", agent=agent, obo=obo, scopes=scopes, expires_at=2**31,
                     token_id=agent)  # fmt: skip


RULE = PolicyRule(name="r", outcome="approve", approval_ttl_s=5)
REVIEWER = _principal("reviewer", "approve:*")


async def test_an_agent_on_the_calls_delegation_chain_may_not_approve_it(redis: Redis) -> None:
    book = ApprovalBook(redis)
    held = HeldCalls(book)
    planner = _principal("planner", "approve:*")
    call = HeldCall(_principal("worker"), ("acme/planner",), "transfer", {"to": "x", "amount": 9},
                    None, RULE)  # fmt: skip
    outcome: list[dict[str, Any]] = []

    async def hold() -> None:
        outcome.append(await held.hold(call))

    async with anyio.create_task_group() as group:
        await group.start(held.listen)
        group.start_soon(hold)
        [record] = await until_true(lambda: book.pending(REVIEWER), 5.0)
        assert record.chain == ("acme/planner",)
        with pytest.raises(Exception, match="on behalf of acme/planner"):
            await book.decide(planner, record.id, "approved", "")
        await book.decide(REVIEWER, record.id, "approved", "checked")
        await until(lambda: bool(outcome), 5.0)
        group.cancel_scope.cancel()
    assert outcome == [{"amount": 9, "to": "x"}]


async def test_a_caller_that_leaves_withdraws_its_approval(redis: Redis) -> None:
    book = ApprovalBook(redis)
    held = HeldCalls(book)
    call = HeldCall(_principal("worker"), (), "transfer", {"amount": 1}, None, RULE)
    with anyio.move_on_after(0.3):
        await held.hold(call)
    assert await book.pending(REVIEWER) == []  # nobody is shown a call no one waits on
    assert len(held) == 0


async def test_the_digest_is_of_the_canonical_arguments() -> None:
    assert arguments_digest({"a": 1, "b": [1, {"c": "é"}]}) == arguments_digest(
        {"b": [1, {"c": "é"}], "a": 1}
    )
    assert arguments_digest({"a": 1}) != arguments_digest({"a": 2})
    assert arguments_digest({"a": {"b": 1}}) != arguments_digest({"a": {"b": 1, "c": None}})


async def test_the_rules_approval_ttl_expires_a_call_without_a_deadline(redis: Redis) -> None:
    held = HeldCalls(ApprovalBook(redis))
    rule = PolicyRule(name="quick", outcome="approve", approval_ttl_s=1)
    began = time.monotonic()
    with pytest.raises(GatewayError) as refused:
        await held.hold(HeldCall(_principal("worker"), (), "t", {}, None, rule))
    assert refused.value.error.code is ErrorCode.APPROVAL_EXPIRED
    assert "approval time ran out" in refused.value.error.message
    assert 0.9 < time.monotonic() - began < 2.5

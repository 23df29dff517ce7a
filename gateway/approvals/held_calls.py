"""`HeldCalls`: the calls this replica holds for approval, released from any replica.

The authorize stage hands a call an `approve` rule holds to `hold`, which (unless its token was
revoked) records it in the `ApprovalBook` (pending, bound to the caller, its chain, the tool,
the digest of its canonical arguments and its deadline) and waits, within the call's deadline
and the rule's approval TTL, whichever comes first. An approver's decision, on any replica, is
published on the book's channel; `listen` (in the gateway's background group) wakes the waiting
call, which reads its record once: approved, the call goes on with exactly the arguments
approved (the record's, checked against the digest); denied, APPROVAL_DENIED with the approver's
note; nobody in time, the call settles its approval as expired and is APPROVAL_EXPIRED. A call
whose caller leaves (cancelled, disconnected) withdraws its approval.

A settlement published while this replica was not listening is not lost: the waiting call reads
its record every `RECHECK_S` as well.
"""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

import anyio
from anyio.abc import TaskStatus

from gateway.approvals.approval_book import CHANNEL, ApprovalBook
from gateway.approvals.approval_refusals import approval_denied, approval_expired
from gateway.approvals.canonical_arguments import arguments_digest, canonical_json
from gateway.identity import generation_key, token_revoked
from gateway.redis_io import listen_to_channel
from protocol import ApprovalRecord, PolicyRule, Principal

RECHECK_S = 1.0  # a held call reads its record this often, whatever it heard


@dataclass(frozen=True)
class HeldCall:
    """What a call held for approval is bound to."""

    principal: Principal
    chain: tuple[str, ...]
    tool: str
    arguments: Mapping[str, Any]
    deadline_ms: int | None
    rule: PolicyRule
    trace_id: str = ""
    # Told the approval once the call waits, and None once it is released (an MCP task
    # shows `input_required` meanwhile).
    on_held: Callable[[ApprovalRecord | None], Awaitable[None]] | None = None


class HeldCalls:
    def __init__(self, book: ApprovalBook) -> None:
        self.book = book
        self._waiting: dict[str, anyio.Event] = {}  # approval id -> woken once it settles

    def __len__(self) -> int:
        return len(self._waiting)

    async def hold(self, call: HeldCall) -> dict[str, Any]:
        """Wait for a person's decision on `call`; the arguments approved, or the refusal."""
        await self._refuse_revoked(call.principal)
        record = _asked(call)
        self._waiting[record.id] = anyio.Event()
        try:
            await self.book.ask(record)
            if call.on_held is not None:
                await call.on_held(record)
            settled = await self._wait(record)
        finally:
            del self._waiting[record.id]
        if settled.status == "approved":
            arguments = dict(settled.arguments)
            if arguments_digest(arguments) != record.digest:  # Redis was written by another
                raise approval_expired(settled)
            if call.on_held is not None:
                await call.on_held(None)
            return arguments
        if settled.status == "denied":
            raise approval_denied(settled)
        raise approval_expired(settled)

    async def _refuse_revoked(self, principal: Principal) -> None:
        """AUTH_REVOKED for a token of an earlier generation of its agent: the budget stage
        refuses it only after authorize, and no person should be asked to approve its call."""
        current = await self.book.redis.get(generation_key(principal.tenant, principal.agent))
        if int(current or 0) > principal.generation:
            raise token_revoked(principal)

    async def _wait(self, record: ApprovalRecord) -> ApprovalRecord:
        try:
            while (left := record.expires_at_ms / 1000 - time.time()) > 0:
                with anyio.move_on_after(min(left, RECHECK_S)):
                    await self._waiting[record.id].wait()
                now = await self.book.get(record.tenant, record.id)
                if now is None or now.status != "pending":
                    return now or record
                self._waiting[record.id] = anyio.Event()
            await self.book.settle(record, "expired")
        except anyio.get_cancelled_exc_class():
            with anyio.CancelScope(shield=True):  # the caller left: nobody waits on it now
                await self.book.settle(record, "withdrawn")
            raise
        return await self.book.get(record.tenant, record.id) or record

    async def listen(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Wake the held calls whose approvals are settled, on any replica, for good."""
        await listen_to_channel(self.book.redis, CHANNEL, self._apply, task_status=task_status)

    def _apply(self, data: bytes | str) -> None:
        try:
            _, approval_id = json.loads(data)
        except (TypeError, ValueError):
            return  # not ours: the channel's name is public to whoever shares the Redis
        event = self._waiting.get(str(approval_id))
        if event is not None:
            event.set()


def _asked(call: HeldCall) -> ApprovalRecord:
    now = int(time.time() * 1000)
    expires = now + call.rule.approval_ttl_s * 1000
    if call.deadline_ms is not None:
        expires = min(expires, call.deadline_ms)
    # Canonical: what approvers see and what runs are the same JSON value, key order aside.
    arguments = json.loads(canonical_json(call.arguments))
    return ApprovalRecord(
        id=f"ap_{secrets.token_hex(16)}",
        tenant=call.principal.tenant,
        agent=call.principal.agent,
        obo=call.principal.obo,
        chain=call.chain,
        tool=call.tool,
        arguments=arguments,
        digest=arguments_digest(arguments),
        policy=call.rule.name,
        reason=call.rule.reason,
        trace_id=call.trace_id,
        asked_at_ms=now,
        deadline_ms=call.deadline_ms,
        expires_at_ms=expires,
    )

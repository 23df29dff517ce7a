"""`ApprovalBook`: held calls in Redis, what approvers see of them, and their decisions.

Key layout (in the tenant's hash slot, as its MCP tasks are):
- `cc:{t:<tenant>}:approval:<id>`: a hash: `call` (the held call as asked: JSON of an
  `ApprovalRecord` without its decision), `status`, `expires` (unix ms), and once settled
  `by`, `note`, `at`. Kept `KEEP_MS` past its expiry, so `show` and the audit outlive it.
- `cc:{t:<tenant>}:approvals:pending`: a sorted set of the pending ids by expiry; at most
  `MOST_PENDING` a tenant (its expired members are dropped as a call is held).
- `CHANNEL` (pub/sub): `[tenant, id]` once an approval is settled, for the replica holding
  its call (`gateway.approvals.held_calls`).

A call held is told to the operator's webhook too, when one is set (`approval_webhook`).

Asking and settling are one Lua script each (`lua/`), so a decision, its caller's expiry and
its caller leaving settle an approval once, whichever comes first, on any replica. Who may
decide is checked here: an identity of the call's tenant whose `approve:<glob>` covers the
tool, and that is none of the call's own: not its caller, nor the user it was made for, nor
an agent on its delegation chain.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from typing import Any, Literal

from redis.asyncio import Redis

from gateway.approvals.approval_refusals import (
    approval_expired,
    approval_not_found,
    may_not_decide,
    settled_before,
    too_many_waiting,
)
from gateway.approvals.approval_webhook import ApprovalWebhook
from gateway.redis_io import lua_script
from gateway.telemetry import AuditRecord, AuditWriter
from protocol import ApprovalRecord, Principal

CHANNEL = "conclave:approvals"  # pub/sub: [tenant, id] of a settled approval
KEEP_MS = 7 * 24 * 3600 * 1000  # a settled or expired record is kept this long
MOST_PENDING = 1000  # calls a tenant may have waiting for approval at once
_LISTED = 500  # pending approvals one listing shows at most

ASK = lua_script("gateway.approvals", "approval_ask")
SETTLE = lua_script("gateway.approvals", "approval_settle")

Decision = Literal["approved", "denied"]
Settlement = Literal["approved", "denied", "expired", "withdrawn"]


def _record_key(tenant: str, approval_id: str) -> str:
    return f"cc:{{t:{tenant}}}:approval:{approval_id}"


def _pending_key(tenant: str) -> str:
    return f"cc:{{t:{tenant}}}:approvals:pending"


def _now_ms() -> int:
    return int(time.time() * 1000)


def identity_of(principal: Principal) -> str:
    """How a record names an approver: tenant/agent, and the user it acts for."""
    who = f"{principal.tenant}/{principal.agent}"
    return f"{who} ({principal.obo})" if principal.obo else who


class ApprovalBook:
    def __init__(
        self,
        redis: Redis,
        audit: AuditWriter | None = None,
        webhook: ApprovalWebhook | None = None,
    ) -> None:
        self.redis = redis
        self.audit = audit
        self.webhook = webhook  # told of each call held, for an operator's receiver
        self._ask = redis.register_script(ASK.text)
        self._settle = redis.register_script(SETTLE.text)

    async def ask(self, record: ApprovalRecord) -> None:
        """Hold `record`'s call (pending); RATE_LIMITED when its tenant has too many waiting."""
        call = record.model_dump_json(exclude={"status", "decided_by", "decided_at_ms", "note"})
        held = await self._ask(
            keys=ASK.keys(
                record_key=_record_key(record.tenant, record.id),
                pending_key=_pending_key(record.tenant),
            ),
            args=ASK.argv(
                id=record.id,
                call=call,
                now_ms=record.asked_at_ms,
                expires_at_ms=record.expires_at_ms,
                keep_ms=KEEP_MS,
                most_pending=MOST_PENDING,
            ),
        )
        if not held:
            raise too_many_waiting(record.tenant, MOST_PENDING)
        self._audit(record, "approval:asked", record.agent, record.obo)
        if self.webhook is not None:
            self.webhook.notify(record)

    async def get(self, tenant: str, approval_id: str) -> ApprovalRecord | None:
        return _record(await self.redis.hgetall(_record_key(tenant, approval_id)))

    async def pending(self, approver: Principal) -> list[ApprovalRecord]:
        """The tenant's calls waiting for approval that `approver` may decide, oldest first."""
        records = await self.pending_of(approver.tenant)
        return [r for r in records if approver.may_approve(r.tool)]

    async def pending_of(self, tenant: str) -> list[ApprovalRecord]:
        """All of the tenant's calls waiting for approval, oldest first (the console's)."""
        now = _now_ms()
        ids = await self.redis.zrangebyscore(
            _pending_key(tenant), now, "+inf", start=0, num=_LISTED
        )
        async with self.redis.pipeline(transaction=False) as pipe:
            for approval_id in ids:
                pipe.hgetall(_record_key(tenant, str(approval_id)))
            fields = await pipe.execute()
        records = [r for r in map(_record, fields) if r is not None and r.status == "pending"]
        return sorted(records, key=lambda r: r.asked_at_ms)

    async def show(self, approver: Principal, approval_id: str) -> ApprovalRecord:
        """One approval, pending or settled, of a tool `approver` may decide."""
        record = await self.get(approver.tenant, approval_id)
        if record is None or not approver.may_approve(record.tool):
            raise approval_not_found(approval_id)  # another tool's: not there, as for tools
        return record

    async def decide(
        self,
        approver: Principal,
        approval_id: str,
        decision: Decision,
        note: str,
        *,
        acted_by: str = "",
    ) -> ApprovalRecord:
        """Approve or deny a pending call as `approver`, once; the settled record. `acted_by`:
        who decided as the approver, when it was not the approver itself (the console's admin)."""
        record = await self.show(approver, approval_id)
        why_not = _why_not(approver, record)
        if why_not is not None:
            raise may_not_decide(record, why_not)
        by = identity_of(approver) + (f" via {acted_by}" if acted_by else "")
        settled, status = await self.settle(record, decision, by, note)
        after = await self.get(record.tenant, record.id) or record
        if status == "expired":
            raise approval_expired(after)
        if not settled and status != decision:
            raise settled_before(after)
        if settled:
            self._audit(after, f"approval:{decision}", approver.agent, approver.obo)
        return after

    async def settle(
        self, record: ApprovalRecord, status: Settlement, by: str = "", note: str = ""
    ) -> tuple[bool, str]:
        """(whether this settled it, its status now); publishes a settlement on `CHANNEL`."""
        settled, now = await self._settle(
            keys=SETTLE.keys(
                record_key=_record_key(record.tenant, record.id),
                pending_key=_pending_key(record.tenant),
            ),
            args=SETTLE.argv(id=record.id, status=status, by=by, note=note, now_ms=_now_ms()),
        )
        if settled:
            await self.redis.publish(CHANNEL, json.dumps([record.tenant, record.id]))
        return bool(settled), _text(now)

    def _audit(self, record: ApprovalRecord, operation: str, agent: str, obo: str | None) -> None:
        if self.audit is None:
            return
        self.audit.submit(
            AuditRecord(
                at_ms=_now_ms(),
                trace_id=record.trace_id,
                tenant=record.tenant,
                agent=agent,
                obo=obo or "",
                transport="http",
                operation=operation,
                tool=record.tool,
                outcome="ok",
                duration_ms=0.0,
                deadline_ms=record.deadline_ms,
                approval={
                    "id": record.id,
                    "asked_by": record.agent,
                    "policy": record.policy,
                    "reason": record.reason,
                    "digest": record.digest,
                    "status": record.status,
                    "decided_by": record.decided_by,
                    "note": record.note,
                },
            )
        )


def _why_not(approver: Principal, record: ApprovalRecord) -> str | None:
    """Why `approver` may not decide `record`'s call (None: it may)."""
    if approver.agent == record.agent:
        return "it is your own call: another approver must decide it"
    me = f"{approver.tenant}/{approver.agent}"
    if me in record.chain:
        return (
            f"the call was made on behalf of {me} (it is on the call's delegation chain):"
            " another approver must decide it"
        )
    theirs = {record.agent, *([record.obo] if record.obo else [])}
    mine = {approver.agent, *([approver.obo] if approver.obo else [])} & theirs
    if mine:
        return (
            f"the call was made on behalf of {min(mine)}, whom you act as: another approver"
            " must decide it"
        )
    return None


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def _record(fields: Mapping[Any, Any]) -> ApprovalRecord | None:
    if not fields:
        return None
    held = {_text(k): _text(v) for k, v in fields.items()}
    asked = json.loads(held["call"])
    return ApprovalRecord.model_validate(
        {
            **asked,
            "status": held["status"],
            "decided_by": held.get("by", ""),
            "decided_at_ms": int(held["at"]) if held.get("at") else None,
            "note": held.get("note", ""),
        }
    )

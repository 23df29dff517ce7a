"""Commits: several writes checked and applied at once by one Lua script.

The script checks, for every written key, the lease and fencing token (owned namespaces, and
any key under a live lease), the `expected_version`, and then that every read the commit
depends on (the caller's read log for this session, when the namespace validates reads, plus
the explicit `read_set`) is still current. Any refusal lists every offending key and writes
nothing. Otherwise it writes all keys, bumps their versions, records the new versions in the
writer's read log and appends one history entry. With an `idempotency_key` the first
successful outcome is stored (per agent, for a day) and a retry returns it with
`replayed: true` instead of applying twice; refused commits are not stored, so a retry after
fixing the cause is judged afresh.

Under durability "replicated" the commit is acknowledged only once `WAIT` confirms a replica
holds it, else 503 `DURABILITY_UNCONFIRMED` (`gateway.redis_io.redis_client.PooledScript`). A retry
with the same idempotency key then returns the stored outcome if the first attempt was
applied, or applies it if not, and waits for a replica again either way: a replay refreshes
its idempotency record, a write, so the WAIT on its connection also covers the first attempt.

Before any Redis work, a commit over the caps (`StateLimits`: writes, read-set entries, value
size) is refused 413 `PAYLOAD_TOO_LARGE`. In the script, a commit that would take its tenant
over the state quota (keys holding a value; every byte it holds: values, history entries, read
logs, idempotency records) is refused whole, 507 `STATE_QUOTA_EXCEEDED`; a commit that only
shrinks the usage always passes. A commit that would take Redis into the reserve it keeps below
its `maxmemory` (for admission, revocation and refusals) is refused the same way, retryable.
Nothing is written in either case.

A write with an `op` (increment, append, merge, add_to_set: `protocol.StateOp`) is applied to
the stored value by the script (`lua/state_ops.lua`), with the same lease, version and
read checks as any write. Its key is not put in the writer's read log (the writer did not see
the value it changed), so ops on one key by many agents never conflict. An op that does not
fit the stored value (increment on a string) refuses the whole commit, 422
`INVALID_ARGUMENTS`; the value cap and the quota apply to the op's result. The result of each
op comes back in `CommitResult.values`; the history records the op and its operand, not the
result (the checker replays it), so an op on a large value adds a small history entry.
"""

from __future__ import annotations

import json

from gateway.state.keys import Actor, NamespaceKeys, check_key
from gateway.state.limits import StateLimits
from gateway.state.refusals import (
    conflict_from_script,
    namespace_not_found,
    op_does_not_fit,
    quota_exceeded,
    read_log_full,
    store_full,
    value_too_large,
)
from gateway.state.scripts import COMMIT, StateScripts
from protocol import CommitRequest, CommitResult


def encode_value(value: object) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


async def commit(
    scripts: StateScripts,
    keys: NamespaceKeys,
    actor: Actor,
    request: CommitRequest,
    limits: StateLimits,
) -> CommitResult:
    limits.check_commit_size(request)
    encoded: list[str] = []
    for write in request.writes:
        check_key(write.key)
        text = "" if write.delete else encode_value(write.value)
        size = len(text.encode())
        if size > limits.max_value_bytes:
            raise value_too_large(write.key, size, limits.max_value_bytes)
        encoded.append(text)
    for key in request.read_set:
        check_key(key)
    history_values = ",".join(
        f"{json.dumps(w.key)}:{text or 'null'}"
        for w, text in zip(request.writes, encoded, strict=True)
        if w.op is None
    )
    history_ops = {w.key: {"op": w.op, "value": w.value} for w in request.writes if w.op}
    idem = request.idempotency_key
    script_keys = COMMIT.keys(
        cfg=keys.config,
        read_log=keys.read_log(actor.agent, actor.session),
        history=keys.history,
        idempotency=keys.idempotency(actor.agent, idem) if idem else keys.config,
        usage=keys.usage,
        ledger=keys.expiring,
        sizes=keys.expiring_bytes,
        # The writes' data keys (in the writes' order), then the read set's (for the slot).
        data=[
            *(keys.data(w.key) for w in request.writes),
            *(keys.data(k) for k in request.read_set),
        ],
    )
    # 6 per write, then 2 per explicit read (commit.lua's `records`).
    records: list[str | int] = []
    for write, text in zip(request.writes, encoded, strict=True):
        records += [
            write.key,
            text,
            "1" if write.delete else "0",
            "" if write.expected_version is None else write.expected_version,
            "" if write.fencing_token is None else write.fencing_token,
            write.op or "",
        ]
    for key, version in request.read_set.items():
        records += [key, version]
    args = COMMIT.argv(
        agent=actor.agent,
        session=actor.session,
        n_writes=len(request.writes),
        n_reads=len(request.read_set),
        has_idempotency="1" if idem else "0",
        read_log_ttl_s=limits.read_log_ttl_s,
        idempotency_ttl_s=limits.idempotency_ttl_s,
        history_values="{" + history_values + "}",
        key_prefix=keys.prefix,
        quota_keys=limits.quota_keys,
        quota_bytes=limits.quota_bytes,
        history_len=limits.history_max,
        read_log_max=limits.max_read_log,
        history_ops=encode_value(history_ops),
        value_max=limits.max_value_bytes,
        reserve_bytes=limits.store_reserve_bytes,
        records=records,
    )
    reply = await scripts.commit(script_keys, args, wait=scripts.wait)
    status = reply[0]
    if status == "NSNF":
        raise namespace_not_found(keys.namespace)
    if status == "CONFLICT":
        raise conflict_from_script(reply[1], reply[2], reply[3:])
    if status == "LOG_FULL":
        raise read_log_full(actor.session, int(reply[1]), limits.max_read_log)
    if status == "QUOTA":
        used_keys, used_bytes, add_keys, add_bytes = (int(x) for x in reply[1:5])
        raise quota_exceeded(
            actor.tenant,
            (used_keys, used_bytes),
            (add_keys, add_bytes),
            (limits.quota_keys, limits.quota_bytes),
        )
    if status == "STORE_FULL":
        raise store_full(actor.tenant, int(reply[1]), int(reply[2]), int(reply[3]))
    if status == "BAD_OP":
        raise op_does_not_fit(reply[1], reply[2], reply[3])
    if status == "TOO_LARGE":
        raise value_too_large(reply[1], int(reply[2]), limits.max_value_bytes)
    outcome = json.loads(reply[1])
    return CommitResult(
        commit_id=outcome["commit_id"],
        versions={k: int(v) for k, v in outcome["versions"].items()},
        values={k: json.loads(v) for k, v in outcome.get("values", {}).items()},
        replayed=status == "REPLAY",
    )

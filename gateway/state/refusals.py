"""The SERF errors the state store refuses with, built in one place so they read alike."""

from __future__ import annotations

import json
from typing import Any

from gateway.gateway_error import GatewayError
from protocol import ConflictDetail, ErrorCode

_WHAT_TO_DO = {
    ErrorCode.STATE_CONFLICT: "read the listed keys again and retry with their current versions",
    ErrorCode.LEASE_HELD: "another agent holds the lease; retry after it expires or is released",
    ErrorCode.LEASE_REQUIRED: "acquire a lease on the listed keys and send its fencing token",
    ErrorCode.LEASE_EXPIRED: "your lease expired; acquire it again and redo the work",
    ErrorCode.FENCED: "your fencing token is stale; acquire the lease again and redo the work",
}


def namespace_not_found(namespace: str) -> GatewayError:
    return GatewayError.of(
        ErrorCode.NAMESPACE_NOT_FOUND,
        f"state namespace {namespace!r} does not exist for your tenant: create it with "
        f"PUT /v1/state/{namespace} (needs state:{namespace}:write)",
    )


def conflict(code: ErrorCode, conflicts: list[dict[str, Any]]) -> GatewayError:
    """A 409 whose `details.conflicts` lists every key that caused it."""
    listed = [ConflictDetail.model_validate(c) for c in conflicts]
    keys = ", ".join(sorted({c.key for c in listed}))
    return GatewayError.of(
        code,
        f"{_WHAT_TO_DO[code]} (keys: {keys})",
        details={"conflicts": [c.model_dump(exclude_none=True) for c in listed]},
    )


def conflict_from_script(
    code: str, conflicts_json: str, shown: list[Any] | None = None
) -> GatewayError:
    """The script's refusal; `shown` is (key, value JSON, version) for each stale key, read in
    the script itself, so each value is exactly the one at the version listed with it."""
    conflicts: list[dict[str, Any]] = json.loads(conflicts_json)
    shown = shown or []
    values = {shown[i]: (shown[i + 1], int(shown[i + 2])) for i in range(0, len(shown), 3)}
    for detail in conflicts:
        if detail["key"] in values:
            raw, version = values[detail["key"]]
            detail["current_version"] = version
            detail["current_value"] = json.loads(raw) if raw else None
    return conflict(ErrorCode(code), conflicts)


def value_too_large(key: str, size: int, limit: int) -> GatewayError:
    return GatewayError.of(
        ErrorCode.PAYLOAD_TOO_LARGE,
        f"the value for key {key!r} is {size} bytes as JSON; the limit is {limit}: store a "
        "smaller value or split it over several keys",
        param_hints={f"writes.{key}.value": f"at most {limit} bytes as JSON"},
        details={"key": key, "size_bytes": size, "limit_bytes": limit},
    )


_OP_NEEDS = {
    "increment": "a number",
    "append": "a list",
    "add_to_set": "a list",
    "merge": "a JSON object",
}


def op_does_not_fit(key: str, op: str, stored_type: str) -> GatewayError:
    """An op whose key holds a value of another type (increment on a string, ...)."""
    return GatewayError.of(
        ErrorCode.INVALID_ARGUMENTS,
        f"key {key!r} holds a value of JSON type {stored_type}; op {op} needs "
        f"{_OP_NEEDS[op]} (or no value): write the key with a plain value instead, or use an "
        "op that fits it. Nothing was written.",
        param_hints={f"writes.{key}.op": f"{op} needs {_OP_NEEDS[op]}, not {stored_type}"},
        details={"key": key, "op": op, "stored_type": stored_type},
    )


def too_many(field: str, count: int, limit: int, setting: str) -> GatewayError:
    return GatewayError.of(
        ErrorCode.PAYLOAD_TOO_LARGE,
        f"the commit's {field} has {count} entries; the limit is {limit} ({setting}): split "
        "the work over several commits",
        param_hints={field: f"at most {limit} entries"},
        details={"field": field, "count": count, "limit": limit, "setting": setting},
    )


def read_log_full(session: str, size: int, limit: int) -> GatewayError:
    return GatewayError.of(
        ErrorCode.INVALID_REQUEST,
        f"session {session!r} has read {size} distinct keys; one session's read log holds at "
        f"most {limit} (state_max_read_log): go on in a new session (X-Conclave-Session), or "
        "wait until this one has been idle long enough for its read log to expire",
        details={"session": session, "read_log_keys": size, "limit": limit},
    )


def quota_exceeded(
    tenant: str, used: tuple[int, int], added: tuple[int, int], quota: tuple[int, int]
) -> GatewayError:
    """`used`, `added`, `quota`: (keys holding a value, bytes held) of the tenant's state,
    bytes being its values, history entries, read logs and idempotency records."""
    return GatewayError.of(
        ErrorCode.STATE_QUOTA_EXCEEDED,
        f"tenant {tenant!r} holds {used[0]} keys and {used[1]} bytes of state (values, "
        f"history, read logs, idempotency records); this commit would add {added[0]} keys and "
        f"{added[1]} bytes, over the quota of {quota[0]} keys and {quota[1]} bytes: delete "
        "keys you no longer need, or ask an operator to raise state_quota_keys / "
        "state_quota_bytes. Nothing was written.",
        details={
            "used": {"keys": used[0], "bytes": used[1]},
            "commit_adds": {"keys": added[0], "bytes": added[1]},
            "quota": {"keys": quota[0], "bytes": quota[1]},
        },
    )


def _bytes_over_quota(
    tenant: str, used: int, added: int, quota: int, what: str, adds: str, fix: str
) -> GatewayError:
    """The byte quota refused an operation that would add `added` bytes (`what` says which)."""
    return GatewayError.of(
        ErrorCode.STATE_QUOTA_EXCEEDED,
        f"tenant {tenant!r} holds {used} bytes of state; {what} {added} bytes, over the quota "
        f"of {quota} bytes (state_quota_bytes): {fix}",
        details={"used": {"bytes": used}, adds: {"bytes": added}, "quota": {"bytes": quota}},
    )


def read_log_over_quota(tenant: str, used: int, added: int, quota: int) -> GatewayError:
    fix = (
        "delete keys you no longer need, or read in a session whose read log already holds "
        "the key. Nothing was read or logged."
    )
    what = "logging this read would add"
    return _bytes_over_quota(tenant, used, added, quota, what, "read_adds", fix)


def leases_over_quota(tenant: str, used: int, added: int, quota: int) -> GatewayError:
    fix = "delete keys you no longer need. No lease was granted."
    what = "these leases would create keys of"
    return _bytes_over_quota(tenant, used, added, quota, what, "leases_add", fix)


def namespace_over_quota(tenant: str, used: int, added: int, quota: int) -> GatewayError:
    fix = "use a namespace you have, or delete keys you no longer need. Nothing was created."
    what = "a new namespace takes"
    return _bytes_over_quota(tenant, used, added, quota, what, "namespace_adds", fix)


def task_over_quota(tenant: str, used: int, added: int, quota: int) -> GatewayError:
    fix = "wait for the tenant's ended tasks to expire, or delete keys you no longer need."
    what = "this call's MCP task would add"
    return _bytes_over_quota(tenant, used, added, quota, what, "task_adds", fix)


def store_full(tenant: str, used_memory: int, maxmemory: int, reserve: int) -> GatewayError:
    """Redis is down to the reserve it keeps for admission, revocation and refusals."""
    return GatewayError.of(
        ErrorCode.STATE_QUOTA_EXCEEDED,
        f"the shared store is full for state: Redis uses {used_memory} of its {maxmemory} "
        f"bytes (maxmemory) and keeps the last {reserve} (redis_reserve_mb) for admission and "
        f"revocation; tenant {tenant!r}'s write was refused and nothing was written: delete "
        "keys you no longer need, or ask an operator to raise redis_maxmemory_mb.",
        details={"used_memory": used_memory, "maxmemory": maxmemory, "reserve": reserve},
    )

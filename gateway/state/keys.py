"""Where a namespace's data lives in Redis, and which names callers may use.

Every Redis key of a tenant's state carries the hash tag ``{t:<tenant>}``, so one Lua script
can touch a namespace's keys and the tenant's quota usage atomically (on a Redis Cluster a
tenant's state lives in one slot; tenants spread over the cluster). The tenant always comes
from the caller's principal, never from the request, so one tenant's names cannot reach
another's keys.

- ``cc:{t:<tenant>}:usage``  hash: every byte the tenant makes Redis hold, against its quota:
  keys, bytes (its values), hist (its history entries), held (its expiring records)
- ``cc:{t:<tenant>}:expiring``        sorted set: expiring record (read log, idempotency
  record) -> when it expires (ms), so its bytes leave the usage once it has gone
- ``cc:{t:<tenant>}:expiring_bytes``  hash: expiring record -> the bytes charged for it

Layout of one namespace, under the prefix ``cc:{t:<tenant>}:ns:<ns>:``

- ``cfg``                  hash: mode, validate_reads (its existence is the namespace's)
- ``k:<key>``              hash: val (JSON text), ver, owner, lexp (lease expiry, ms), fence
- ``rl:<agent>:<session>`` hash: key -> version read (the read log), expiring when idle
- ``idem:<agent>:<key>``   string: the first successful outcome of an idempotent commit
- ``hist``                 stream: one entry per applied commit, the last ~N kept

The key names ``history`` and ``keys`` are reserved: ``GET /v1/state/{ns}/history`` is the
history, ``GET /v1/state/{ns}/keys`` the list of keys.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from gateway.gateway_error import GatewayError
from protocol import KEY_PATTERN, NAME_PATTERN, ErrorCode

RESERVED_KEYS = frozenset({"history", "keys"})  # the namespace's routes of those names
SESSION_PATTERN = r"^[A-Za-z0-9_.:\-]{1,128}$"
_KEY = re.compile(KEY_PATTERN)
_NAME = re.compile(NAME_PATTERN)
_SESSION = re.compile(SESSION_PATTERN)


@dataclass(frozen=True)
class Actor:
    """Who performs a state operation: always taken from the token, plus the session."""

    tenant: str
    agent: str
    session: str


@dataclass(frozen=True)
class NamespaceKeys:
    tenant: str
    namespace: str

    @property
    def prefix(self) -> str:
        return f"cc:{{t:{self.tenant}}}:ns:{self.namespace}:"

    @property
    def usage(self) -> str:
        """The tenant's quota usage, shared by all its namespaces."""
        return f"cc:{{t:{self.tenant}}}:usage"

    @property
    def expiring(self) -> str:
        """The tenant's expiring records (read logs, idempotency records) by expiry."""
        return f"cc:{{t:{self.tenant}}}:expiring"

    @property
    def expiring_bytes(self) -> str:
        """The bytes charged for each of the tenant's expiring records."""
        return f"cc:{{t:{self.tenant}}}:expiring_bytes"

    @property
    def config(self) -> str:
        return self.prefix + "cfg"

    @property
    def history(self) -> str:
        return self.prefix + "hist"

    def data(self, key: str) -> str:
        return f"{self.prefix}k:{key}"

    def read_log(self, agent: str, session: str) -> str:
        return f"{self.prefix}rl:{agent}:{session}"

    def idempotency(self, agent: str, idempotency_key: str) -> str:
        return f"{self.prefix}idem:{agent}:{idempotency_key}"


def _invalid(what: str, value: str, rule: str) -> GatewayError:
    shown = value if len(value) <= 40 else value[:40] + "..."
    return GatewayError.of(
        ErrorCode.INVALID_ARGUMENTS,
        f"{what} {shown!r} is not valid: {rule}",
        param_hints={what: rule},
    )


def check_namespace(namespace: str) -> str:
    if not _NAME.fullmatch(namespace):
        raise _invalid("namespace", namespace, "1-64 of A-Z a-z 0-9 _ . -, starting alphanumeric")
    return namespace


def check_key(key: str) -> str:
    if not _KEY.fullmatch(key):
        raise _invalid("key", key, "1-256 of A-Z a-z 0-9 _ . : / -")
    if key in RESERVED_KEYS:
        raise _invalid("key", key, "'history' and 'keys' are reserved (the namespace's routes)")
    return key


def check_session(session: str) -> str:
    if not _SESSION.fullmatch(session):
        raise _invalid("session", session, "1-128 of A-Z a-z 0-9 _ . : -")
    return session

"""What one tenant may put on the shared store: per-request caps and per-tenant quotas.

The caps on a commit (writes, read-set entries, value size) are checked here, before any
Redis work, so an oversized commit costs the store nothing. The read-log cap is checked by the
read script (a session cannot log more distinct keys than `max_read_log`), the quotas by the
commit and read scripts (atomically with the writes), the history length by the commit.

The byte quota counts every byte a tenant makes Redis hold: its values, its history entries,
its read logs and its idempotency records (`lua/tenant_bytes.lua`). Below Redis's own
`maxmemory` the scripts keep `store_reserve_bytes` free for admission, revocation and the audit
of refusals: a state write that would eat into it is refused, so an operator can always
revoke a tenant that fills the store.
"""

from __future__ import annotations

from dataclasses import dataclass

from gateway.config import Settings
from gateway.state.refusals import too_many
from protocol import CommitRequest

READ_LOG_TTL_S = 24 * 3600  # an idle session's read log goes after a day
IDEMPOTENCY_TTL_S = 24 * 3600


@dataclass(frozen=True)
class StateLimits:
    max_value_bytes: int
    max_writes: int
    max_read_set: int
    max_read_log: int  # distinct keys in one session's read log
    history_max: int  # entries kept per namespace (approximately: trimmed by whole nodes)
    quota_keys: int  # keys holding a value, per tenant
    quota_bytes: int  # bytes of values, history, read logs, idempotency records, per tenant
    store_reserve_bytes: int = 0  # kept below Redis's maxmemory; state writes may not use it
    read_log_ttl_s: int = READ_LOG_TTL_S
    idempotency_ttl_s: int = IDEMPOTENCY_TTL_S

    @classmethod
    def from_settings(cls, settings: Settings) -> StateLimits:
        return cls(
            max_value_bytes=settings.max_value_bytes,
            max_writes=settings.state_max_writes,
            max_read_set=settings.state_max_read_set,
            max_read_log=settings.state_max_read_log,
            history_max=settings.state_history_max,
            quota_keys=settings.state_quota_keys,
            quota_bytes=settings.state_quota_bytes,
            store_reserve_bytes=settings.redis_reserve_mb * 1_048_576,
        )

    def check_commit_size(self, request: CommitRequest) -> None:
        """Refuse a commit with more writes or read-set entries than the caps allow."""
        if len(request.writes) > self.max_writes:
            raise too_many("writes", len(request.writes), self.max_writes, "state_max_writes")
        if len(request.read_set) > self.max_read_set:
            raise too_many(
                "read_set", len(request.read_set), self.max_read_set, "state_max_read_set"
            )

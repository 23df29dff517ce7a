"""Shared-state operations on the wire: reads, leases, commits and their history."""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

KEY_PATTERN = r"^[A-Za-z0-9_.:/\-]{1,256}$"


class NamespaceMode(StrEnum):
    OWNED = "owned"  # writes need the key's lease and its current fencing token
    OPTIMISTIC = "optimistic"  # writes need only current versions


class NamespaceConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    mode: NamespaceMode = NamespaceMode.OPTIMISTIC
    validate_reads: bool = True


class ReadResult(BaseModel):
    """A key as read; `version` 0 means the key does not exist yet."""

    model_config = ConfigDict(extra="forbid")

    namespace: str
    key: str
    value: Any = None
    version: int = Field(ge=0)
    owner: str | None = None
    lease_expires_at_ms: int | None = None


class LeaseRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    keys: list[str] = Field(min_length=1, max_length=256)
    ttl_ms: int = Field(default=10_000, gt=0, le=600_000)


class LeaseGrant(BaseModel):
    model_config = ConfigDict(extra="forbid")

    key: str
    owner: str
    fencing_token: int = Field(ge=1)
    expires_at_ms: int


class LeaseGrants(BaseModel):
    model_config = ConfigDict(extra="forbid")

    leases: list[LeaseGrant]


class Write(BaseModel):
    model_config = ConfigDict(extra="forbid")

    key: str = Field(pattern=KEY_PATTERN)
    value: Any = None
    delete: bool = False
    expected_version: int | None = Field(default=None, ge=0)
    fencing_token: int | None = Field(default=None, ge=1)


class CommitRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    writes: list[Write] = Field(min_length=1, max_length=256)
    read_set: dict[str, int] = Field(default_factory=dict, description="key -> version read")
    idempotency_key: str | None = Field(default=None, min_length=1, max_length=128)

    @model_validator(mode="after")
    def _one_write_per_key(self) -> CommitRequest:
        keys = [w.key for w in self.writes]
        if len(keys) != len(set(keys)):
            raise ValueError("each key may be written at most once per commit")
        if any(v < 0 for v in self.read_set.values()):
            raise ValueError("read_set versions must be >= 0")
        return self


class CommitResult(BaseModel):
    model_config = ConfigDict(extra="forbid")

    commit_id: str
    versions: dict[str, int]
    replayed: bool = Field(default=False, description="true when an idempotency key matched")


class HistoryEntry(BaseModel):
    """One applied commit, as the history stream records it."""

    model_config = ConfigDict(extra="forbid")

    commit_id: str
    agent: str
    session: str
    keys: dict[str, tuple[int, int]] = Field(description="key -> (previous, new) version")
    values: dict[str, Any] = Field(default_factory=dict, description="key -> value written")
    read_set: dict[str, int] = Field(default_factory=dict)
    time_ms: int

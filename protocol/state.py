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


class StateOp(StrEnum):
    """A commutative operation a write applies to the stored value, inside the commit.

    Two op writes on one key by different agents never conflict: neither depends on the value
    it did not see. `value` is the operand; a missing (or deleted) key counts as the op's
    empty value.
    """

    INCREMENT = "increment"  # add a number to the stored number (missing: 0)
    APPEND = "append"  # append any JSON value to the stored list (missing: [])
    # deep-merge a JSON object into the stored object (missing: {}): where both sides hold an
    # object the merge recurses, anywhere else the operand's value replaces the stored one, so
    # merges on disjoint paths commute and on the same path the later commit wins
    MERGE = "merge"
    ADD_TO_SET = "add_to_set"  # append to the stored list unless an equal value is in it


class Write(BaseModel):
    """One key's write: a value to store, a delete, or an `op` whose operand is `value`."""

    model_config = ConfigDict(extra="forbid")

    key: str = Field(pattern=KEY_PATTERN)
    value: Any = None
    delete: bool = False
    op: StateOp | None = None
    expected_version: int | None = Field(default=None, ge=0)
    fencing_token: int | None = Field(default=None, ge=1)

    @model_validator(mode="after")
    def _op_operand_fits(self) -> Write:
        if self.op is None:
            return self
        if self.delete:
            raise ValueError(f"op {self.op} cannot be combined with delete: send one or other")
        number = isinstance(self.value, int | float) and not isinstance(self.value, bool)
        if self.op is StateOp.INCREMENT and not number:
            raise ValueError("op increment needs a number as its value")
        if self.op is StateOp.MERGE and not isinstance(self.value, dict):
            raise ValueError("op merge needs a JSON object as its value")
        return self


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
    values: dict[str, Any] = Field(
        default_factory=dict, description="key -> the value an op produced (op writes only)"
    )
    replayed: bool = Field(default=False, description="true when an idempotency key matched")


class AppliedOp(BaseModel):
    """An op as the history records it: the op and its operand."""

    model_config = ConfigDict(extra="forbid")

    op: StateOp
    value: Any = None


class HistoryEntry(BaseModel):
    """One applied commit, as the history stream records it."""

    model_config = ConfigDict(extra="forbid")

    commit_id: str
    agent: str
    session: str
    keys: dict[str, tuple[int, int]] = Field(description="key -> (previous, new) version")
    values: dict[str, Any] = Field(
        default_factory=dict, description="key -> value written (plain writes; ops are in `ops`)"
    )
    ops: dict[str, AppliedOp] = Field(
        default_factory=dict, description="key -> the op that produced its value (op writes)"
    )
    read_set: dict[str, int] = Field(default_factory=dict)
    expected_versions: dict[str, int] = Field(
        default_factory=dict,
        description="key -> the expected_version its write was sent with (checked as a read)",
    )
    time_ms: int

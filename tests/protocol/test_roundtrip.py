"""Every wire model survives JSON, and bad input is refused with a precise error."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

from protocol import (
    CODE_TABLE,
    Budget,
    BudgetGrant,
    CallToolParams,
    CallToolResult,
    CallUsage,
    CommitRequest,
    CommitResult,
    ConflictDetail,
    ErrorCode,
    HistoryEntry,
    InitializeResult,
    JsonRpcErrorObject,
    JsonRpcErrorResponse,
    JsonRpcNotification,
    JsonRpcRequest,
    JsonRpcResponse,
    LeaseGrant,
    LeaseGrants,
    LeaseRequest,
    ListToolsResult,
    McpTool,
    NamespaceConfig,
    Principal,
    ReadResult,
    RecoveryAction,
    ResourceIntent,
    ResourceRequest,
    SerfError,
    TokenClaims,
    ToolCallRequest,
    ToolCallResult,
    ToolContext,
    ToolSpec,
    Write,
)

PRINCIPAL = Principal(
    tenant="acme", agent="planner", obo="alice", scopes=("tool:*",), expires_at=2, token_id="t"
)
SAMPLES: list[BaseModel] = [
    JsonRpcRequest(jsonrpc="2.0", id=1, method="tools/list", params={}),
    JsonRpcNotification(jsonrpc="2.0", method="notifications/initialized"),
    JsonRpcResponse(id="a", result={"tools": []}),
    JsonRpcErrorResponse(id=None, error=JsonRpcErrorObject(code=-32700, message="parse")),
    ListToolsResult(tools=[McpTool(name="echo", inputSchema={"type": "object"})]),
    CallToolParams(name="echo", arguments={"message": "hi"}, _meta={"x": 1}),
    CallToolResult(content=[], structuredContent={"a": 1}, isError=True),
    InitializeResult(),
    TokenClaims(sub="a", tenant="t", scopes=("tool:*",), iat=1, exp=2, jti="j", gen=3),
    PRINCIPAL,
    Budget(deadline_ms=1_700_000_000_000, plan=("echo", "run_python"), reserve_ms=200),
    BudgetGrant(granted_ms=100, remaining_ms=5),
    SerfError.of(ErrorCode.STATE_CONFLICT, "stale read", details={"keys": ["a"]}),
    ConflictDetail(key="a", reason="stale_read", expected_version=1, current_version=2),
    ReadResult(namespace="ns", key="k", value={"x": [1, 2]}, version=3),
    LeaseRequest(keys=["a", "b"], ttl_ms=500),
    LeaseGrants(leases=[LeaseGrant(key="a", owner="x", fencing_token=1, expires_at_ms=5)]),
    CommitRequest(writes=[Write(key="a", value=1, expected_version=0)], read_set={"b": 2}),
    CommitResult(commit_id="c1", versions={"a": 1}),
    HistoryEntry(commit_id="c", agent="a", session="s", keys={"a": (0, 1)}, time_ms=1),
    NamespaceConfig(),
    ToolSpec(name="echo", input_schema={"type": "object"}, intent=ResourceIntent(memory_mb=64)),
    ToolCallRequest(arguments={"message": "x"}, limits=ResourceRequest(timeout_ms=10)),
    ToolCallResult(tool="echo", result="x", usage=CallUsage(wall_ms=1.5), trace_id="t"),
    ToolContext(principal=PRINCIPAL, session_id="s", trace_id="t", traceparent="00-t-s-01"),
]


@pytest.mark.parametrize("model", SAMPLES, ids=lambda m: type(m).__name__)
def test_round_trips_through_json(model: BaseModel) -> None:
    again = type(model).model_validate_json(model.model_dump_json(by_alias=True))
    assert again == model


def _rejects(model: type[BaseModel], data: Any, field: str) -> None:
    with pytest.raises(ValidationError) as info:
        model.model_validate(data)
    assert field in {".".join(str(p) for p in e["loc"]) for e in info.value.errors()}


def test_bad_jsonrpc_version_is_rejected() -> None:
    _rejects(JsonRpcRequest, {"jsonrpc": "1.0", "id": 1, "method": "x"}, "jsonrpc")


def test_unknown_serf_code_is_rejected() -> None:
    data = SerfError.of(ErrorCode.INTERNAL, "x").model_dump() | {"code": "NOPE"}
    _rejects(SerfError, data, "code")


def test_negative_budget_is_rejected() -> None:
    _rejects(Budget, {"deadline_ms": -5}, "deadline_ms")
    _rejects(Budget, {"reserve_ms": -1}, "reserve_ms")


def test_malformed_state_ops_are_rejected() -> None:
    _rejects(CommitRequest, {"writes": []}, "writes")
    _rejects(CommitRequest, {"writes": [{"key": "bad key!"}]}, "writes.0.key")
    _rejects(LeaseRequest, {"keys": ["a"], "ttl_ms": 0}, "ttl_ms")
    with pytest.raises(ValidationError, match="at most once"):
        CommitRequest.model_validate({"writes": [{"key": "a"}, {"key": "a"}]})


def test_bad_scope_is_rejected() -> None:
    _rejects(TokenClaims, {"sub": "a", "tenant": "t", "scopes": ["root"], "iat": 1,
                           "exp": 2, "jti": "j"}, "scopes")  # fmt: skip


def test_every_code_has_a_complete_entry() -> None:
    assert set(CODE_TABLE) == set(ErrorCode)
    for code, info in CODE_TABLE.items():
        error = SerfError.of(code, "m")
        assert error.http_status == info.http_status >= 400
        assert error.action in RecoveryAction


def test_scopes_grant_what_they_say() -> None:
    p = PRINCIPAL.model_copy(
        update={"scopes": ("tool:run_*", "state:team-*:write", "state:public:read")}
    )
    assert p.may_call("run_python") and not p.may_call("echo")
    assert p.may_access("team-a", "write") and p.may_access("team-a", "read")
    assert p.may_access("public", "read") and not p.may_access("public", "write")
    assert not p.may_access("other", "read")

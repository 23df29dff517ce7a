"""The pipeline as a whole: order, a stage added without touching the others, accounting."""

from __future__ import annotations

import logging
import time

import anyio
import pytest
from redis.asyncio import Redis

from gateway.gateway_error import GatewayError
from gateway.pipeline import AccountStage, Pipeline, RequestContext
from gateway.pipeline.pipeline import PAST_DEADLINE_GRACE_S
from gateway.telemetry import AuditLog, AuditWriter, GatewayMetrics
from protocol import ErrorCode, Principal, ToolContext

pytestmark = pytest.mark.anyio


class _Recorder:
    def __init__(self, name: str, log: list[str], refuse: bool = False) -> None:
        self.name = name
        self.log = log
        self.refuse = refuse

    async def __call__(self, ctx: RequestContext) -> None:
        self.log.append(self.name)
        if self.refuse:
            raise GatewayError.of(ErrorCode.TOOL_NOT_ALLOWED, f"{self.name} says no")


async def test_stages_run_in_order_and_a_refusal_stops_them_but_not_account() -> None:
    log: list[str] = []
    pipeline = Pipeline(
        [_Recorder("a", log), _Recorder("b", log, refuse=True), _Recorder("c", log)],
        closing=[_Recorder("account", log)],
    )
    ctx = await pipeline.run(RequestContext("http", "x", {}))
    assert log == ["a", "b", "account"]
    assert ctx.error is not None and ctx.error.code is ErrorCode.TOOL_NOT_ALLOWED
    assert ctx.failed_stage == "b"
    assert ctx.error.trace_id == ctx.trace_id  # the refusal names the request's trace


async def test_an_unexpected_exception_becomes_internal_and_is_accounted() -> None:
    class Broken:
        name = "broken"

        async def __call__(self, ctx: RequestContext) -> None:
            raise ZeroDivisionError("oops")

    log: list[str] = []
    ctx = await Pipeline([Broken()], closing=[_Recorder("account", log)]).run(
        RequestContext("http", "x", {})
    )
    assert ctx.error is not None and ctx.error.code is ErrorCode.INTERNAL
    assert log == ["account"]


async def test_account_writes_audit_and_metrics(redis: Redis) -> None:
    metrics = GatewayMetrics()
    audit = AuditLog(redis)
    writer = AuditWriter(audit)
    ctx = RequestContext("mcp", "echo", {}, tool_name="echo")
    ctx.principal = Principal(tenant="acme", agent="w", obo="alice", expires_at=0, token_id="j")
    ctx.error = GatewayError.of(ErrorCode.RATE_LIMITED, "slow down", retry_after_ms=10).error
    ctx.failed_stage = "budget"
    await AccountStage(writer, metrics)(ctx)
    await writer.flush()
    [record] = await audit.query(agent="w")
    assert (record.tenant, record.obo, record.outcome, record.code) == (
        "acme",
        "alice",
        "refused",
        "RATE_LIMITED",
    )
    assert record.trace_id == ctx.trace_id
    assert metrics.registry.get_sample_value("conclave_errors_total", {"code": "RATE_LIMITED"}) == 1
    limited = metrics.registry.get_sample_value(
        "conclave_rate_limited_total", {"operation": "(unresolved tool)"}
    )
    assert limited == 1


async def test_refusals_log_at_info_but_contention_at_debug_and_both_are_audited(
    redis: Redis, caplog: pytest.LogCaptureFixture
) -> None:
    writer = AuditWriter(AuditLog(redis))
    account = AccountStage(writer, GatewayMetrics())
    caplog.set_level(logging.DEBUG, logger="conclave.gateway.access")
    for code in (ErrorCode.TOOL_NOT_ALLOWED, ErrorCode.STATE_CONFLICT):
        ctx = RequestContext("http", "state:commit", {}, namespace="ns")
        ctx.error = GatewayError.of(code, "no").error
        await account(ctx)
    await writer.flush()
    levels = {r.code: r.levelno for r in caplog.records}  # type: ignore[attr-defined]
    assert levels == {"TOOL_NOT_ALLOWED": logging.INFO, "STATE_CONFLICT": logging.DEBUG}
    audited = [r.code for r in await AuditLog(redis).query() if r.operation == "state:commit"]
    assert sorted(audited) == ["STATE_CONFLICT", "TOOL_NOT_ALLOWED"]


class _Scope:
    """Sets the request's deadline, as the scope stage does."""

    name = "scope"

    def __init__(self, in_ms: int) -> None:
        self.in_ms = in_ms

    async def __call__(self, ctx: RequestContext) -> None:
        principal = Principal(tenant="acme", agent="w", expires_at=0, token_id="j")
        deadline = int(time.time() * 1000) + self.in_ms
        ctx.tool_context = ToolContext(
            principal=principal, session_id="s", trace_id="t", traceparent="", deadline_ms=deadline
        )


class _Slow:
    """A stage that answers `seconds` after it starts (a sandbox's late kill, a paused store)."""

    name = "dispatch"

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    async def __call__(self, ctx: RequestContext) -> None:
        await anyio.sleep(self.seconds)
        raise GatewayError.of(ErrorCode.TOOL_TIMEOUT, "killed at its grant")


async def test_a_stage_answering_just_past_the_deadline_keeps_its_answer() -> None:
    began = time.monotonic()
    ctx = await Pipeline([_Scope(100), _Slow(0.1 + PAST_DEADLINE_GRACE_S / 2)]).run(
        RequestContext("http", "x", {})
    )
    assert ctx.error is not None and ctx.error.code is ErrorCode.TOOL_TIMEOUT
    assert time.monotonic() - began < 0.1 + PAST_DEADLINE_GRACE_S


async def test_a_stage_that_does_not_answer_is_cut_after_the_deadline_and_its_grace() -> None:
    began = time.monotonic()
    ctx = await Pipeline([_Scope(100), _Slow(30)]).run(RequestContext("http", "x", {}))
    waited = time.monotonic() - began
    assert ctx.error is not None and ctx.error.code is ErrorCode.DEADLINE_EXCEEDED
    assert ctx.failed_stage == "dispatch"
    assert 0.1 + PAST_DEADLINE_GRACE_S - 0.01 <= waited < 0.1 + PAST_DEADLINE_GRACE_S + 0.5


async def test_a_late_answer_comes_before_its_accounting_which_the_gateway_waits_for() -> None:
    """A request answered past its deadline is answered at once; its closing stages run
    after, in the group the gateway's lifespan holds, which it leaves only once they ran."""

    class SlowAccount:
        name = "account"

        def __init__(self) -> None:
            self.accounted = anyio.Event()

        async def __call__(self, ctx: RequestContext) -> None:
            await anyio.sleep(0.3)
            self.accounted.set()

    account = SlowAccount()
    pipeline = Pipeline([_Scope(50), _Slow(30)], closing=[account])
    async with pipeline.closing_late():
        ctx = await pipeline.run(RequestContext("http", "x", {}))
        assert ctx.error is not None and ctx.error.code is ErrorCode.DEADLINE_EXCEEDED
        assert not account.accounted.is_set()  # answered before it was accounted
    assert account.accounted.is_set()  # the lifespan left once it was

"""Every SERF code is mapped (one table) and reachable (some real component produces it).

Each producer below drives a real part of the system to the failure (most through the real
app: pipeline, state store, process-backend sandbox pool) and returns the envelope it
answered with; the test checks the code and that the envelope carries the table's category
and retryability.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import httpx
import pytest
from redis.asyncio import Redis
from starlette.requests import Request

from gateway.approvals import ApprovalBook, HeldCall, HeldCalls
from gateway.assembly import create_app
from gateway.budgets import CircuitBreaker, LatencyEstimate, allocate_budget
from gateway.config import Settings
from gateway.delegation import DelegationChain
from gateway.gateway_error import translate
from gateway.identity.tokens import bearer_token, issue_token, verify_token
from gateway.pipeline import AuthorizeStage, RequestContext
from gateway.policy import Policies, compile_rules
from gateway.sources.shared.client_channel import ClientRequestCheck, capability_missing
from protocol import PolicyRule, Principal
from protocol.serf import CODE_TABLE, ErrorCategory, ErrorCode, RecoveryAction, SerfError
from protocol.tools import ToolCallRequest
from tests.helpers import until_true
from tools.registry import default_registry
from tools.tool_exceptions import tool_exception_code

pytestmark = pytest.mark.anyio

Producer = Callable[[Settings, Redis, httpx.AsyncClient], Awaitable[SerfError]]
PRODUCERS: dict[ErrorCode, Producer] = {}


def produces(code: ErrorCode) -> Callable[[Producer], Producer]:
    def register(fn: Producer) -> Producer:
        PRODUCERS[code] = fn
        return fn

    return register


def _raised(fn: Callable[[], object]) -> SerfError:
    try:
        fn()
    except Exception as exc:
        return translate(exc)
    raise AssertionError("expected a failure")


async def _raised_async(fn: Callable[[], Awaitable[object]]) -> SerfError:
    try:
        await fn()
    except Exception as exc:
        return translate(exc)
    raise AssertionError("expected a failure")


@produces(ErrorCode.AUTH_REQUIRED)
async def _no_token(settings: Settings, redis: Redis, client: httpx.AsyncClient) -> SerfError:

    request = httpx.Request("GET", "http://gateway/v1/tools")

    scope = {
        "type": "http",
        "headers": [(k.encode(), v.encode()) for k, v in request.headers.items()],
    }
    return _raised(lambda: bearer_token(Request(scope)))


@produces(ErrorCode.AUTH_INVALID)
async def _tampered(settings: Settings, redis: Redis, client: httpx.AsyncClient) -> SerfError:
    token = issue_token(settings, tenant="t", agent="a")
    return _raised(lambda: verify_token(settings, token[:-3] + "xyz"))


@produces(ErrorCode.AUTH_EXPIRED)
async def _expired(settings: Settings, redis: Redis, client: httpx.AsyncClient) -> SerfError:
    token = issue_token(settings, tenant="t", agent="a", ttl_s=1, now=1_000)
    return _raised(lambda: verify_token(settings, token))


@produces(ErrorCode.INVALID_REQUEST)
async def _malformed(settings: Settings, redis: Redis, client: httpx.AsyncClient) -> SerfError:
    return _raised(lambda: ToolCallRequest.model_validate({"arguments": 3}))


@produces(ErrorCode.PARSE_ERROR)
async def _not_json(settings: Settings, redis: Redis, client: httpx.AsyncClient) -> SerfError:
    return _raised(lambda: ToolCallRequest.model_validate_json("{nope"))


@produces(ErrorCode.INVALID_ARGUMENTS)
async def _bad_args(settings: Settings, redis: Redis, client: httpx.AsyncClient) -> SerfError:
    echo = default_registry.get("echo")
    assert echo is not None
    return _raised(lambda: echo.validate({"message": ["not", "a", "string"]}))


@produces(ErrorCode.NOT_FOUND)
async def _no_route(settings: Settings, redis: Redis, client: httpx.AsyncClient) -> SerfError:
    return SerfError.model_validate((await client.get("/v1/nothing-here")).json())


@produces(ErrorCode.METHOD_NOT_ALLOWED)
async def _bad_method(settings: Settings, redis: Redis, client: httpx.AsyncClient) -> SerfError:
    return SerfError.model_validate((await client.delete("/healthz")).json())


@produces(ErrorCode.METHOD_NOT_FOUND)
async def _no_rpc_method(settings: Settings, redis: Redis, client: httpx.AsyncClient) -> SerfError:
    message = {"jsonrpc": "2.0", "id": 1, "method": "no/such"}
    answer = await client.post("/mcp", json=message, headers=_bearer(settings, "rpc", []))
    return SerfError.model_validate(answer.json()["error"]["data"])


@produces(ErrorCode.CLIENT_CAPABILITY_MISSING)
async def _undeclared(settings: Settings, redis: Redis, client: httpx.AsyncClient) -> SerfError:
    # An upstream's tool asks the client to sample; the 2026-07-28 request declared only
    # elicitation (tests/gateway/sources/test_mcp_streaming.py drives this through a real upstream).
    stopped: list[bool] = []
    check = ClientRequestCheck({"elicitation": {}}, lambda: stopped.append(True))
    check.asked({"jsonrpc": "2.0", "id": 0, "method": "sampling/createMessage"})
    assert stopped == [True]
    return capability_missing("fx", "fx__test_sampling", check.missing)


@produces(ErrorCode.STATE_UNAVAILABLE)
async def _no_redis(settings: Settings, redis: Redis, client: httpx.AsyncClient) -> SerfError:
    app = create_app(Settings(redis_url="unix:///nonexistent/redis.sock", allowed_hosts=("g",)))
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://g") as dead:
            return SerfError.model_validate((await dead.get("/readyz")).json())


@produces(ErrorCode.STATE_QUOTA_EXCEEDED)
async def _over_quota(settings: Settings, redis: Redis, client: httpx.AsyncClient) -> SerfError:
    app = create_app(settings.model_copy(update={"state_quota_keys": 1}))
    token = issue_token(settings, tenant="cov", agent="quota", scopes=["state:*:write"])
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(
            transport=transport, base_url=str(client.base_url),
            headers={"Authorization": f"Bearer {token}"},
        ) as agent:  # fmt: skip
            await agent.put("/v1/state/q", json={})
            writes = [{"key": "a", "value": 1}, {"key": "b", "value": 2}]
            answer = await agent.post("/v1/state/q/commit", json={"writes": writes})
            return SerfError.model_validate(answer.json())


@produces(ErrorCode.DURABILITY_UNCONFIRMED)
async def _no_replica(settings: Settings, redis: Redis, client: httpx.AsyncClient) -> SerfError:
    """Durability "replicated" on the test Redis, which has no replica to confirm a commit."""
    durable = {"durability": "replicated", "durability_timeout_ms": 50}
    app = create_app(settings.model_copy(update=durable))
    token = issue_token(settings, tenant="cov", agent="durable", scopes=["state:*:write"])
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(
            transport=transport, base_url=str(client.base_url),
            headers={"Authorization": f"Bearer {token}"},
        ) as agent:  # fmt: skip
            await agent.put("/v1/state/d", json={})
            writes = [{"key": "a", "value": 1}]
            answer = await agent.post("/v1/state/d/commit", json={"writes": writes})
            return SerfError.model_validate(answer.json())


def _estimate(p50: float) -> LatencyEstimate:
    return LatencyEstimate("slow", p50, p50 * 2, 20, 0, "observed")


@produces(ErrorCode.BUDGET_EXHAUSTED)
async def _too_tight(settings: Settings, redis: Redis, client: httpx.AsyncClient) -> SerfError:
    return _raised(
        lambda: allocate_budget(remaining_ms=50, reserve_ms=0, this=_estimate(100), max_ms=1000)
    )


@produces(ErrorCode.DEADLINE_EXCEEDED)
async def _too_late(settings: Settings, redis: Redis, client: httpx.AsyncClient) -> SerfError:
    return _raised(
        lambda: allocate_budget(remaining_ms=-1, reserve_ms=0, this=_estimate(1), max_ms=1000)
    )


@produces(ErrorCode.UPSTREAM_UNAVAILABLE)
async def _open_circuit(settings: Settings, redis: Redis, client: httpx.AsyncClient) -> SerfError:
    breaker = CircuitBreaker(redis, failures=1, cooldown_ms=60_000)
    await breaker.record("acme", "down", ok=False)
    return await _raised_async(lambda: breaker.admit("acme", "down", probe_ttl_ms=100))


def _tool_failure(name: str, **arguments: object) -> Producer:
    async def produce(settings: Settings, redis: Redis, client: httpx.AsyncClient) -> SerfError:
        import tools.harness.faults  # noqa: F401  the fault tools register on import

        registered = default_registry.get(name)
        assert registered is not None
        try:
            registered.invoke(dict(arguments))
        except Exception as exc:
            return SerfError.of(tool_exception_code(exc), str(exc))
        raise AssertionError(f"{name} did not fail")

    return produce


PRODUCERS[ErrorCode.RATE_LIMITED] = _tool_failure("rate_limited", key="cov", limit=0)
PRODUCERS[ErrorCode.STATE_CONFLICT] = _tool_failure("versioned_put", key="cov", expected_version=9)
PRODUCERS[ErrorCode.PERMISSION_DENIED] = _tool_failure("forbidden", path="/etc/shadow")
PRODUCERS[ErrorCode.TOOL_FAILED] = _tool_failure("broken")


@produces(ErrorCode.SANDBOX_UNAVAILABLE)
async def _pool_shut(settings: Settings, redis: Redis, client: httpx.AsyncClient) -> SerfError:
    """A pool that is shut down refuses (the pool cap is shown by the sandbox's suite)."""
    from sandbox.backends.process import ProcessBackend
    from sandbox.pool import SandboxPool
    from tests.sandbox.conftest import invocation

    pool = await SandboxPool(ProcessBackend(), tool_modules=("tools.builtin",)).open()
    await pool.aclose()
    outcome = await pool.execute(invocation("echo", {"message": "x"}, module="tools.builtin"))
    assert outcome.error is not None
    return outcome.error


@produces(ErrorCode.SHUTTING_DOWN)
async def _shutdown(settings: Settings, redis: Redis, client: httpx.AsyncClient) -> SerfError:
    """A gateway's shutdown past its grace interrupts the pool: the call in flight is cut."""
    from sandbox.backends.process import ProcessBackend
    from sandbox.pool import SandboxPool
    from tests.sandbox.conftest import invocation

    pool = await SandboxPool(ProcessBackend(), tool_modules=("tools.builtin",)).open()
    call = invocation("run_shell", {"command": "sleep 30"}, module="tools.builtin")
    outcomes = []
    try:
        async with anyio.create_task_group() as group:

            async def run() -> None:
                outcomes.append(await pool.execute(call))

            group.start_soon(run)
            with anyio.fail_after(20):
                while not pool._busy:  # noqa: ASYNC110 (the call holds its started sandbox)
                    await anyio.sleep(0.02)
            await pool.interrupt()
    finally:
        await pool.aclose()
    assert outcomes[0].error is not None
    return outcomes[0].error


@produces(ErrorCode.AGENT_NOT_ALLOWED)
async def _agent_not_allowed(
    settings: Settings, redis: Redis, client: httpx.AsyncClient
) -> SerfError:
    """The authorize stage, for a caller whose scopes name tools but no A2A agent (the budget
    stage raises what it left; tests/e2e/test_a2a_e2e.py shows it over HTTP)."""
    principal = Principal(
        tenant="cov", agent="caller", scopes=("tool:*",), expires_at=2**31, token_id="t"
    )
    ctx = RequestContext("a2a", "a2a:SendMessage", {}, a2a_agent="planner")
    ctx.principal = principal
    await AuthorizeStage(default_registry, {"planner"})(ctx)
    assert ctx.tool_refusal is not None
    return translate(ctx.tool_refusal)


@produces(ErrorCode.DELEGATION_LOOP)
async def _delegation_loop(
    settings: Settings, redis: Redis, client: httpx.AsyncClient
) -> SerfError:
    """A request to an agent already on its chain (tests/gateway/a2a/test_a2a_in_process.py sends
    one over HTTP)."""
    principal = Principal(
        tenant="cov", agent="caller", scopes=("agent:*",), expires_at=2**31, token_id="t"
    )
    ctx = RequestContext("a2a", "a2a:SendMessage", {}, a2a_agent="planner")
    ctx.principal, ctx.chain = principal, DelegationChain(("planner", "helper"))
    await AuthorizeStage(default_registry, {"planner"})(ctx)
    assert ctx.tool_refusal is not None
    return translate(ctx.tool_refusal)


@produces(ErrorCode.POLICY_DENIED)
async def _policy_denied(settings: Settings, redis: Redis, client: httpx.AsyncClient) -> SerfError:
    """A deny rule over the call's arguments (tests/gateway/policy/test_policy_rules.py has
    more)."""
    rule = PolicyRule(name="no-big-echo", tools=("echo",), when="size(args.message) > 3",
                      outcome="deny")  # fmt: skip
    principal = Principal(
        tenant="cov", agent="caller", scopes=("tool:*",), expires_at=2**31, token_id="t"
    )
    ctx = RequestContext("http", "echo", {}, tool_name="echo", arguments={"message": "long"})
    ctx.principal = principal
    await AuthorizeStage(default_registry, (), Policies(compile_rules([rule])))(ctx)
    assert ctx.tool_refusal is not None
    return translate(ctx.tool_refusal)


def _held_echo(deadline_ms: int | None = None) -> HeldCall:
    caller = Principal(tenant="cov", agent="caller", scopes=("tool:*",), expires_at=2**31,
                       token_id="t")  # fmt: skip
    rule = PolicyRule(name="ask-first", outcome="approve")
    return HeldCall(caller, (), "echo", {"message": "long"}, deadline_ms, rule)


@produces(ErrorCode.APPROVAL_DENIED)
async def _approval_denied(
    settings: Settings, redis: Redis, client: httpx.AsyncClient
) -> SerfError:
    """An approver denies a held call (tests/gateway/approvals/test_approvals.py has more)."""
    book = ApprovalBook(redis)
    held = HeldCalls(book)
    approver = Principal(tenant="cov", agent="boss", scopes=("approve:*",), expires_at=2**31,
                         token_id="b")  # fmt: skip

    async def deny() -> None:
        pending = await until_true(lambda: book.pending(approver), 5.0)
        await book.decide(approver, pending[0].id, "denied", "not today")

    async with anyio.create_task_group() as group:
        await group.start(held.listen)
        group.start_soon(deny)
        error = await _raised_async(lambda: held.hold(_held_echo()))
        group.cancel_scope.cancel()
    return error


@produces(ErrorCode.APPROVAL_EXPIRED)
async def _approval_expired(
    settings: Settings, redis: Redis, client: httpx.AsyncClient
) -> SerfError:
    """Nobody decides before the held call's deadline."""
    held = HeldCalls(ApprovalBook(redis))
    deadline = int(time.time() * 1000) + 100
    return await _raised_async(lambda: held.hold(_held_echo(deadline)))


@produces(ErrorCode.INTERNAL)
async def _bug(settings: Settings, redis: Redis, client: httpx.AsyncClient) -> SerfError:
    return translate(ZeroDivisionError("a bug"))


# --- through the real app: pipeline, state store and sandbox pool (process backend) ------


def _bearer(settings: Settings, agent: str, scopes: list[str]) -> dict[str, str]:
    return {
        "Authorization": f"Bearer {issue_token(settings, tenant='cov', agent=agent, scopes=scopes)}"
    }


async def _envelope(response: httpx.Response) -> SerfError:
    assert response.status_code >= 400, response.text
    return SerfError.model_validate(response.json())


async def _call(
    client: httpx.AsyncClient, headers: dict[str, str], tool: str, **body: Any
) -> SerfError:
    return await _envelope(await client.post(f"/v1/tools/{tool}/call", json=body, headers=headers))


def _via(settings_scopes: list[str], tool: str, **body: Any) -> Producer:
    async def produce(settings: Settings, redis: Redis, client: httpx.AsyncClient) -> SerfError:
        return await _call(client, _bearer(settings, "caller", settings_scopes), tool, **body)

    return produce


PRODUCERS[ErrorCode.TOOL_NOT_ALLOWED] = _via(
    ["tool:echo"], "run_shell", arguments={"command": "true"}
)
PRODUCERS[ErrorCode.TOOL_NOT_FOUND] = _via(["tool:*"], "no_such_tool")
PRODUCERS[ErrorCode.LIMIT_ABOVE_INTENT] = _via(
    ["tool:*"], "echo", arguments={"message": "x"}, limits={"timeout_ms": 10_000_000}
)
PRODUCERS[ErrorCode.PAYLOAD_TOO_LARGE] = _via(
    ["tool:*"], "echo", arguments={"message": "x" * 1_200_000}
)
PRODUCERS[ErrorCode.TOOL_TIMEOUT] = _via(
    ["tool:*"],
    "run_python",
    arguments={"code": "import time; time.sleep(5)"},
    limits={"timeout_ms": 300},
)
PRODUCERS[ErrorCode.SANDBOX_OUTPUT_LIMIT] = _via(
    ["tool:*"], "run_python", arguments={"code": "'x' * 3_000_000"}
)
PRODUCERS[ErrorCode.SANDBOX_DISK_FULL] = _via(
    ["tool:*"],
    "run_python",
    arguments={"code": "for n in range(20_000): open(f'f{n}', 'w').close()"},
)
PRODUCERS[ErrorCode.SANDBOX_OOM] = _via(
    ["tool:*"],
    "run_python",
    arguments={"code": "b = bytearray(900 * 2**20)"},
    limits={"memory_mb": 64},
)
PRODUCERS[ErrorCode.SANDBOX_CPU_LIMIT] = _via(
    ["tool:*"], "run_python", arguments={"code": "while True: pass"}, limits={"cpu_seconds": 0.3}
)
PRODUCERS[ErrorCode.SANDBOX_KILLED] = _via(
    ["tool:*"],
    "run_python",
    arguments={"code": "import os; os._exit(3)"},  # its runner, tool code cannot signal
)


@produces(ErrorCode.CANCELLED)
async def _cancelled(settings: Settings, redis: Redis, client: httpx.AsyncClient) -> SerfError:
    """A call its caller cancels with MCP's `notifications/cancelled` (sent until it lands:
    a cancel that arrives before the call runs names nothing yet)."""
    headers = _bearer(settings, "canceller", ["tool:*"])
    params = {"name": "run_shell", "arguments": {"command": "sleep 20"}}
    call = {"jsonrpc": "2.0", "id": "stop", "method": "tools/call", "params": params}
    cancel = {"requestId": "stop"}
    notice = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": cancel}
    answers: list[httpx.Response] = []

    async def post() -> None:
        answers.append(await client.post("/mcp", json=call, headers=headers))

    async with anyio.create_task_group() as group:
        group.start_soon(post)
        with anyio.fail_after(20):
            while not answers:
                assert (await client.post("/mcp", json=notice, headers=headers)).status_code == 202
                await anyio.sleep(0.02)
    return SerfError.model_validate(answers[0].json()["result"]["_meta"]["conclave/error"])


@produces(ErrorCode.AUTH_REVOKED)
async def _revoked(settings: Settings, redis: Redis, client: httpx.AsyncClient) -> SerfError:
    admin = {"X-Conclave-Admin-Key": settings.admin_key.get_secret_value()}
    registered = await client.post(
        "/v1/agents", json={"tenant": "cov", "agent": "gone", "tools": ["echo"]}, headers=admin
    )
    assert registered.status_code == 201, registered.text
    token = registered.json()["token"]
    assert (await client.delete("/v1/agents/cov/gone", headers=admin)).status_code < 300
    headers = {"Authorization": f"Bearer {token}"}
    return await _call(client, headers, "echo", arguments={"message": "x"})


@produces(ErrorCode.ADMIN_REQUIRED)
async def _not_admin(settings: Settings, redis: Redis, client: httpx.AsyncClient) -> SerfError:
    return await _envelope(
        await client.get("/v1/audit", headers=_bearer(settings, "a", ["tool:*"]))
    )


@produces(ErrorCode.NAMESPACE_NOT_FOUND)
async def _no_namespace(settings: Settings, redis: Redis, client: httpx.AsyncClient) -> SerfError:
    headers = _bearer(settings, "a", ["state:*:read"])
    return await _envelope(await client.get("/v1/state/missing/k", headers=headers))


async def _owned(settings: Settings, client: httpx.AsyncClient, ns: str) -> dict[str, str]:
    owner = _bearer(settings, "owner", [f"state:{ns}:write"])
    created = await client.put(f"/v1/state/{ns}", json={"mode": "owned"}, headers=owner)
    assert created.status_code in (200, 201), created.text
    return owner


@produces(ErrorCode.NAMESPACE_FORBIDDEN)
async def _read_only(settings: Settings, redis: Redis, client: httpx.AsyncClient) -> SerfError:
    await _owned(settings, client, "ro")
    reader = _bearer(settings, "reader", ["state:ro:read"])
    body = {"writes": [{"key": "k", "value": 1}]}
    return await _envelope(await client.post("/v1/state/ro/commit", json=body, headers=reader))


@produces(ErrorCode.LEASE_REQUIRED)
async def _no_lease(settings: Settings, redis: Redis, client: httpx.AsyncClient) -> SerfError:
    owner = await _owned(settings, client, "lr")
    body = {"writes": [{"key": "k", "value": 1}]}
    return await _envelope(await client.post("/v1/state/lr/commit", json=body, headers=owner))


@produces(ErrorCode.LEASE_HELD)
async def _held(settings: Settings, redis: Redis, client: httpx.AsyncClient) -> SerfError:
    owner = await _owned(settings, client, "lh")
    other = _bearer(settings, "other", ["state:lh:write"])
    lease = {"keys": ["k"], "ttl_ms": 60_000}
    assert (await client.post("/v1/state/lh/leases", json=lease, headers=owner)).status_code < 300
    return await _envelope(await client.post("/v1/state/lh/leases", json=lease, headers=other))


async def _expired_lease(
    settings: Settings, client: httpx.AsyncClient, ns: str, taken_over: bool
) -> SerfError:
    owner = await _owned(settings, client, ns)
    granted = await client.post(
        f"/v1/state/{ns}/leases", json={"keys": ["k"], "ttl_ms": 50}, headers=owner
    )
    token = granted.json()["leases"][0]["fencing_token"]
    with anyio.fail_after(5):
        while True:  # wait until the lease has expired by the store's clock
            read = (await client.get(f"/v1/state/{ns}/k", headers=owner)).json()
            expires = read.get("lease_expires_at_ms")
            if expires is None or expires < time.time() * 1000 - 5:
                break
            await anyio.sleep(0.02)
    if taken_over:
        other = _bearer(settings, "other", [f"state:{ns}:write"])
        taken = await client.post(f"/v1/state/{ns}/leases", json={"keys": ["k"]}, headers=other)
        assert taken.status_code < 300, taken.text
    body = {"writes": [{"key": "k", "value": 1, "fencing_token": token}]}
    return await _envelope(await client.post(f"/v1/state/{ns}/commit", json=body, headers=owner))


@produces(ErrorCode.LEASE_EXPIRED)
async def _lapsed(settings: Settings, redis: Redis, client: httpx.AsyncClient) -> SerfError:
    return await _expired_lease(settings, client, "le", taken_over=False)


@produces(ErrorCode.FENCED)
async def _fenced(settings: Settings, redis: Redis, client: httpx.AsyncClient) -> SerfError:
    return await _expired_lease(settings, client, "fe", taken_over=True)


def test_every_code_has_one_row_in_the_table() -> None:
    assert set(CODE_TABLE) == set(ErrorCode)
    for code, info in CODE_TABLE.items():
        assert 400 <= info.http_status < 600, code
        if info.retryable:
            assert info.category not in (ErrorCategory.AUTH, ErrorCategory.POLICY), code
        if info.action in (RecoveryAction.RETRY_SAME, RecoveryAction.RETRY_BACKOFF):
            assert info.retryable, f"{code} says retry but is not retryable"


@pytest.mark.parametrize("code", list(ErrorCode))
async def test_every_code_is_reachable(
    code: ErrorCode, settings: Settings, redis: Redis, client: httpx.AsyncClient
) -> None:
    assert code in PRODUCERS, f"no component is shown to produce {code}"
    error = await PRODUCERS[code](settings, redis, client)
    info = CODE_TABLE[code]
    assert error.code == code
    assert (error.category, error.retryable) == (info.category, info.retryable)
    if info.retryable and info.retry_after_ms is not None:
        assert error.retry_after_ms is not None


def test_docker_and_redis_refusals_translate_to_transient_codes() -> None:
    from docker.errors import DockerException, ImageNotFound
    from redis.exceptions import ResponseError

    assert translate(DockerException("engine down")).code == ErrorCode.SANDBOX_UNAVAILABLE
    missing = translate(ImageNotFound("conclave-runtime"))
    assert missing.code == ErrorCode.SANDBOX_UNAVAILABLE and missing.action == "abort"
    assert "build-image" in missing.message
    busy = translate(ResponseError("OOM command not allowed"))
    assert busy.code == ErrorCode.STATE_UNAVAILABLE and busy.retry_after_ms == 500

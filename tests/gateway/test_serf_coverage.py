"""Every SERF code is mapped (one table) and reachable (some real component produces it).

Each producer below drives a real part of the system to the failure and returns the
envelope it answered with; the test checks the code and that the envelope carries the
table's category, retryability and action. Codes whose producer lands with another part of
the system are listed in PENDING with the part that will produce them.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import httpx
import pytest
from redis.asyncio import Redis
from starlette.requests import Request

from gateway.app import create_app
from gateway.auth import bearer_token, issue_token, verify_token
from gateway.budgets import CircuitBreaker, LatencyEstimate, allocate_budget
from gateway.errors import translate
from gateway.settings import Settings
from protocol.serf import CODE_TABLE, ErrorCategory, ErrorCode, RecoveryAction, SerfError
from protocol.tools import ToolCallRequest
from tools.errors import tool_exception_code
from tools.registry import default_registry

pytestmark = pytest.mark.anyio

Producer = Callable[[Settings, Redis, httpx.AsyncClient], Awaitable[SerfError]]
PRODUCERS: dict[ErrorCode, Producer] = {}

_STATE = "the state store (issue 3)"
PENDING: dict[ErrorCode, str] = {
    ErrorCode.NAMESPACE_FORBIDDEN: _STATE,
    ErrorCode.NAMESPACE_NOT_FOUND: _STATE,
    ErrorCode.LEASE_HELD: _STATE,
    ErrorCode.LEASE_REQUIRED: _STATE,
    ErrorCode.LEASE_EXPIRED: _STATE,
    ErrorCode.FENCED: _STATE,
}


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


@produces(ErrorCode.METHOD_NOT_FOUND)
async def _bad_method(settings: Settings, redis: Redis, client: httpx.AsyncClient) -> SerfError:
    return SerfError.model_validate((await client.delete("/healthz")).json())


@produces(ErrorCode.STATE_UNAVAILABLE)
async def _no_redis(settings: Settings, redis: Redis, client: httpx.AsyncClient) -> SerfError:
    app = create_app(Settings(redis_url="unix:///nonexistent/redis.sock"))
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://g") as dead:
            return SerfError.model_validate((await dead.get("/readyz")).json())


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
    await breaker.record("down", ok=False)
    return await _raised_async(lambda: breaker.admit("down", probe_ttl_ms=100))


def _tool_failure(name: str, **arguments: object) -> Producer:
    async def produce(settings: Settings, redis: Redis, client: httpx.AsyncClient) -> SerfError:
        import tools.faults  # noqa: F401  the fault tools register on import

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


def _sandboxed(tool: str, arguments: dict[str, object], **limits: object) -> Producer:
    """Run a misbehaving tool from tools.testing in a real (process) sandbox."""

    async def produce(settings: Settings, redis: Redis, client: httpx.AsyncClient) -> SerfError:
        from sandbox.backends.process import ProcessBackend
        from sandbox.pool import SandboxPool
        from tests.sandbox.conftest import invocation

        pool = SandboxPool(ProcessBackend(), tool_modules=("tools.builtin", "tools.testing"))
        try:
            if tool == "":  # a pool that is shut down refuses: SANDBOX_UNAVAILABLE
                await pool.aclose()
                tool_call = invocation("echo", {"message": "x"}, module="tools.builtin")
            else:
                tool_call = invocation(tool, arguments, **limits)
            outcome = await pool.execute(tool_call)
        finally:
            await pool.aclose()
        assert outcome.error is not None
        return outcome.error

    return produce


PRODUCERS[ErrorCode.TOOL_TIMEOUT] = _sandboxed("sleep", {"seconds": 30}, timeout_ms=200)
PRODUCERS[ErrorCode.SANDBOX_UNAVAILABLE] = _sandboxed("", {})
PRODUCERS[ErrorCode.SANDBOX_OOM] = _sandboxed("allocate", {"megabytes": 2048}, memory_mb=64)
PRODUCERS[ErrorCode.SANDBOX_CPU_LIMIT] = _sandboxed("spin", {}, cpu_seconds=1)
PRODUCERS[ErrorCode.SANDBOX_OUTPUT_LIMIT] = _sandboxed(
    "big_output", {"size": 10_000}, max_output_bytes=1000
)
PRODUCERS[ErrorCode.SANDBOX_KILLED] = _sandboxed("kill_runner", {})


async def _gateway_refusal(
    client: httpx.AsyncClient, method: str, url: str, **kw: object
) -> SerfError:
    response = await client.request(method, url, **kw)  # type: ignore[arg-type]
    return SerfError.model_validate(response.json())


def _call(token: str, tool: str, **body: object) -> tuple[str, str, dict[str, object]]:
    return "POST", f"/v1/tools/{tool}/call", {"json": body, "headers": _bearer(token)}


def _bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@produces(ErrorCode.AUTH_REVOKED)
async def _revoked(settings: Settings, redis: Redis, client: httpx.AsyncClient) -> SerfError:
    admin = {"X-Conclave-Admin-Key": settings.admin_key.get_secret_value()}
    issued = await client.post("/v1/agents", json={"tenant": "t", "agent": "gone"}, headers=admin)
    await client.delete("/v1/agents/t/gone", headers=admin)
    return await _gateway_refusal(
        client, "GET", "/v1/tools", headers=_bearer(issued.json()["token"])
    )


@produces(ErrorCode.ADMIN_REQUIRED)
async def _not_admin(settings: Settings, redis: Redis, client: httpx.AsyncClient) -> SerfError:
    return await _gateway_refusal(client, "GET", "/v1/agents")


def _gateway_call(scopes: list[str], tool: str, **body: object) -> Producer:
    async def produce(settings: Settings, redis: Redis, client: httpx.AsyncClient) -> SerfError:
        token = issue_token(settings, tenant="t", agent="caller", scopes=scopes)
        method, url, kw = _call(token, tool, **body)
        return await _gateway_refusal(client, method, url, **kw)

    return produce


PRODUCERS[ErrorCode.TOOL_NOT_ALLOWED] = _gateway_call(["tool:echo"], "run_shell")
PRODUCERS[ErrorCode.TOOL_NOT_FOUND] = _gateway_call(["tool:*"], "no_such_tool")
PRODUCERS[ErrorCode.LIMIT_ABOVE_INTENT] = _gateway_call(
    ["tool:*"], "echo", arguments={"message": "x"}, limits={"memory_mb": 100_000}
)
PRODUCERS[ErrorCode.PAYLOAD_TOO_LARGE] = _gateway_call(
    ["tool:*"], "echo", arguments={"message": "x" * 2_000_000}
)


@produces(ErrorCode.INTERNAL)
async def _bug(settings: Settings, redis: Redis, client: httpx.AsyncClient) -> SerfError:
    return translate(ZeroDivisionError("a bug"))


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
    if code in PENDING:
        pytest.skip(f"{code} is produced by {PENDING[code]}")
    assert code in PRODUCERS, f"no component is shown to produce {code}"
    error = await PRODUCERS[code](settings, redis, client)
    info = CODE_TABLE[code]
    assert error.code == code
    assert (error.category, error.retryable) == (info.category, info.retryable)
    if info.retryable and info.retry_after_ms is not None:
        assert error.retry_after_ms is not None


def test_pending_codes_are_not_claimed_twice() -> None:
    assert not set(PENDING) & set(PRODUCERS)


def test_docker_and_redis_refusals_translate_to_transient_codes() -> None:
    from docker.errors import DockerException, ImageNotFound
    from redis.exceptions import ResponseError

    assert translate(DockerException("engine down")).code == ErrorCode.SANDBOX_UNAVAILABLE
    missing = translate(ImageNotFound("conclave-runtime"))
    assert missing.code == ErrorCode.SANDBOX_UNAVAILABLE and missing.action == "abort"
    assert "build-image" in missing.message
    busy = translate(ResponseError("OOM command not allowed"))
    assert busy.code == ErrorCode.STATE_UNAVAILABLE and busy.retry_after_ms == 500

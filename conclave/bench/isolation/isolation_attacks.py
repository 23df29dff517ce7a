"""The noisy tenant's attacks for `conclave bench isolation`, one a function (issue 26).

Each runs in the attacker's own process: it sets itself up (registers its agents), says it
started (`AttackRun.start`, from when its `duration_s` counts), attacks until `until`, and
counts what the gateway answered it in `seen`: a SERF code per refusal (the proxy's 429 for
the egress flood, the status a raw connection was refused with for the unauthenticated one),
so the suite can say whether the attacker was refused with a SERF error. No call is retried.
The attack code follows the tests of tests/security/ that first showed each class.
"""

from __future__ import annotations

import contextlib
import json
import math
import time
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import anyio
import httpx

from agents import GatewayCallError, GatewayClient
from protocol import (
    AgentRegistration,
    Budget,
    CommitRequest,
    NamespaceConfig,
    SerfError,
    StateOp,
    Write,
)

Seen = Counter[str]
Attack = Callable[["AttackRun"], Coroutine[Any, Any, None]]
HUGE_TOOL = "hostile__huge"  # the hostile upstream's tool, as the gateway serves it
ATTACKER_ADDRESS = "127.0.0.9"  # the unauthenticated attacker's own loopback address


def _never_retry(error: SerfError, attempt: int) -> float | None:
    return None


@dataclass(frozen=True)
class Target:
    """The gateway under test, as the noisy tenant's own process reaches it."""

    url: str
    admin_key: str
    pool_max: int


@dataclass
class AttackRun:
    """One attack's run: where, for how long once set up, and what it was answered."""

    target: Target
    duration_s: float
    on_start: Callable[[], None]
    seen: Seen = field(default_factory=Counter)
    until: float = math.inf

    def start(self) -> None:
        """Set up: the attack runs `duration_s` from now (the suite is told)."""
        if self.until == math.inf:
            self.until = time.monotonic() + self.duration_s
            self.on_start()


async def new_client(
    target: Target, tenant: str, tools: list[str], *, agent: str | None = None
) -> GatewayClient:
    """A new agent of `tenant`, registered through the admin API, with its own token."""
    admin = GatewayClient(target.url, admin_key=target.admin_key, retry=_never_retry)
    async with admin:
        registration = AgentRegistration(
            tenant=tenant,
            agent=agent or f"a-{uuid.uuid4().hex[:8]}",
            tools=tools,
            namespaces={f"{tenant}-ns": "write"},
        )
        token = (await admin.register_agent(registration)).token
    return GatewayClient(target.url, token, retry=_never_retry)


async def _loop(
    call: Callable[[], Awaitable[Any]],
    run: AttackRun,
    refused_in: Callable[[Any], str | None] | None = None,
) -> None:
    seen = run.seen
    while time.monotonic() < run.until:
        try:
            answer = await call()
        except GatewayCallError as exc:
            seen[exc.code.value] += 1
            await anyio.sleep(0.005)  # a refusal answers at once: don't spin the shared cores
            continue
        except httpx.HTTPError as exc:
            seen[f"no SERF: {type(exc).__name__}"] += 1
            await anyio.sleep(0.005)
            continue
        refused = refused_in(answer) if refused_in is not None else None
        seen[refused or "ok"] += 1


async def _each(
    run: AttackRun,
    tools: list[str],
    clients: int,
    call: Callable[[GatewayClient], Awaitable[Any]],
    refused_in: Callable[[Any], str | None] | None = None,
) -> None:
    made: list[GatewayClient] = []

    async def register() -> None:
        made.append(await new_client(run.target, "noisy", tools))

    async with anyio.create_task_group() as group:
        for _ in range(clients):
            group.start_soon(register)
    run.start()
    async with anyio.create_task_group() as group:
        for client in made:
            group.start_soon(_loop, partial(call, client), run, refused_in)
    for client in made:
        await client.aclose()


async def flood_tool_calls(run: AttackRun) -> None:
    # More agents than the tenant's sandbox share: the flood meets its bounds.
    agents = run.target.pool_max
    await _each(run, ["echo"], agents, lambda c: c.call_tool("echo", {"message": "x"}))


async def hold_slow_sandboxes(run: AttackRun) -> None:
    await _each(
        run, ["sleep"], run.target.pool_max + 16,
        lambda c: c.call_tool("sleep", {"seconds": 2}),
    )  # fmt: skip


async def huge_read_sets(run: AttackRun) -> None:
    """tests/security/test_state_limits.py: commits with an 80,000-key read set. The body is
    serialized once and sent as bytes, as an attacker's client would: what is measured is
    what the gateway spends on it, not the attacker's own JSON encoding on the shared cores."""
    request = CommitRequest(
        writes=[Write(key="k", value=1)], read_set={f"k{i}": 0 for i in range(80_000)}
    )
    body = request.model_dump_json(exclude_none=True).encode()
    tokens = [(await new_client(run.target, "noisy", [])).token or "" for _ in range(4)]
    run.start()

    async def commit(http: httpx.AsyncClient) -> Any:
        answer = await http.post("/v1/state/noisy-ns/commit", content=body)
        if answer.status_code >= 400:
            raise GatewayCallError(SerfError.model_validate(answer.json()), answer.status_code)
        return answer

    async with contextlib.AsyncExitStack() as clients, anyio.create_task_group() as group:
        for token in tokens:
            headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
            http = httpx.AsyncClient(base_url=run.target.url, headers=headers, timeout=30)
            group.start_soon(_loop, partial(commit, await clients.enter_async_context(http)), run)


async def forge_results(run: AttackRun) -> None:
    await _each(run, ["forge_outcome"], 2, lambda c: c.call_tool("forge_outcome", {}))


async def fill_redis(run: AttackRun) -> None:
    """tests/security/test_redis_bytes.py: large values up to the tenant's quota, then
    empty `merge` commits on them (each used to copy the merged values into the history)."""
    big = "x" * 199_998
    client = await new_client(run.target, "noisy", [])
    await client.create_namespace("noisy-ns", NamespaceConfig())
    run.start()
    seen, stored = run.seen, 0

    async def step() -> Any:
        nonlocal stored
        if seen["STATE_QUOTA_EXCEEDED"] == 0:
            stored += 1
            write = [Write(key=f"big{stored}", value={"v": big})]
            return await client.commit("noisy-ns", CommitRequest(writes=write))
        merge = [Write(key=f"big{i}", op=StateOp.MERGE, value={}) for i in (1, 2)]
        return await client.commit("noisy-ns", CommitRequest(writes=merge))

    async with client:
        await _loop(step, run)


async def flood_plans(run: AttackRun) -> None:
    """tests/security/test_plan_bounds.py: echo calls carrying a 60,000-name plan."""
    plan = ["echo", *(f"tool_{i:05d}" for i in range(60_000))]

    async def call(client: GatewayClient) -> Any:
        budget = Budget(deadline_ms=int(time.time() * 1000) + 60_000, plan=plan)
        return await client.call_tool("echo", {"message": "x"}, budget=budget)

    await _each(run, ["echo"], 2, call)


# Past the default 256 MiB workspace quota; what an earlier call left is removed first.
_FILL_WORKSPACE = """
import os
if os.path.exists("fill.bin"):
    os.remove("fill.bin")
chunk = b"x" * (1 << 20)
with open("fill.bin", "wb") as out:
    for _ in range(320):
        out.write(chunk)
"""


async def fill_workspaces(run: AttackRun) -> None:
    await _each(
        run, ["run_python"], 2,
        lambda c: c.call_tool("run_python", {"code": _FILL_WORKSPACE}),
    )  # fmt: skip


def _proxy_refusals(answer: Any) -> str | None:
    """The egress proxy's answers the tool saw: a 429 (its SERF refusal) among them."""
    lines = answer.result if isinstance(answer.result, list) else []
    return "egress 429 (RATE_LIMITED)" if any(" 429 " in f"{s} " for s in lines) else None


async def flood_egress(run: AttackRun) -> None:
    """tests/security/test_egress.py: a tool with network rights opening 64 silent
    connections per call, past its sandbox's caps."""
    arguments = {"count": 64, "send_head": False, "hold_s": 1.0}
    await _each(
        run, ["egress_hold_connections"], 4,
        lambda c: c.call_tool("egress_hold_connections", arguments), _proxy_refusals,
    )  # fmt: skip


async def _refusal_code(stream: anyio.abc.ByteStream) -> str:
    """The SERF code of the answer the gateway wrote before closing ('closed': none)."""
    data = b""
    with anyio.move_on_after(5):
        try:
            while True:
                data += await stream.receive()
        except (anyio.EndOfStream, anyio.BrokenResourceError, OSError):
            pass
    body = data.partition(b"\r\n\r\n")[2]
    try:
        return str(json.loads(body)["code"])
    except (ValueError, KeyError, TypeError):
        return "closed"


async def flood_connections(run: AttackRun) -> None:
    """tests/security/test_connection_bounds.py, as a stranger: idle connections past the
    per-address cap, and heads past the byte cap, over and over, from its own address."""
    host, port = run.target.url.removeprefix("http://").rsplit(":", 1)
    seen = run.seen
    connect = partial(anyio.connect_tcp, host, int(port), local_host=ATTACKER_ADDRESS)
    too_large = b"GET /readyz HTTP/1.1\r\nHost: x\r\nX-F: " + b"x" * 70_000 + b"\r\n\r\n"
    run.start()
    while time.monotonic() < run.until:
        held = []
        try:
            for _ in range(1100):  # past the 1024 a single address may hold
                held.append(await connect())
            for extra in held[1024:]:
                seen[await _refusal_code(extra)] += 1
            for _ in range(10):
                stream = await connect()
                await stream.send(too_large)
                seen[await _refusal_code(stream)] += 1
                await stream.aclose()
        except OSError as exc:
            seen[f"no SERF: {type(exc).__name__}"] += 1
        finally:
            for stream in held:
                await stream.aclose()
        await anyio.sleep(0.2)


async def flood_audit(run: AttackRun) -> None:
    """tests/security/test_audit_per_tenant.py: unauthenticated refusals as fast as they
    are answered (each one audited), to push other tenants' records out."""

    async def stranger() -> None:
        async with httpx.AsyncClient(base_url=run.target.url, timeout=10) as http:
            while time.monotonic() < run.until:
                answer = await http.post("/v1/tools/echo/call", json={"arguments": {}})
                run.seen[str(answer.json().get("code", answer.status_code))] += 1

    run.start()
    async with anyio.create_task_group() as group:
        for _ in range(4):
            group.start_soon(stranger)


async def forge_runner_replies(run: AttackRun) -> None:
    """tests/security/test_runner_boundary.py: a reply over the output cap (48 MiB), as tool
    code holding the runner's socket could send one."""
    await _each(run, ["oversized_reply"], 1, lambda c: c.call_tool("oversized_reply", {}))


async def huge_upstream_answers(run: AttackRun) -> None:
    """A hostile mcp_http upstream's endless answer (`hostile_upstream`, beside this module)."""
    await _each(run, [HUGE_TOOL], 1, lambda c: c.call_tool(HUGE_TOOL, {}))


# What each attack's refusal is, when the gateway defends against it.
ATTACKS: dict[str, tuple[Attack, frozenset[str]]] = {
    "noisy floods tool calls": (
        flood_tool_calls, frozenset({"RATE_LIMITED", "SANDBOX_UNAVAILABLE"})
    ),
    "noisy holds slow sandboxes": (
        hold_slow_sandboxes, frozenset({"SANDBOX_UNAVAILABLE", "RATE_LIMITED"})
    ),
    # Past its tenant's rate of large bodies a commit is refused unread, before that parsed.
    "noisy commits huge read sets": (
        huge_read_sets, frozenset({"PAYLOAD_TOO_LARGE", "RATE_LIMITED"})
    ),
    "noisy forges results": (forge_results, frozenset({"SANDBOX_KILLED", "TOOL_FAILED"})),
    "noisy fills redis": (fill_redis, frozenset({"STATE_QUOTA_EXCEEDED"})),
    # The plan's names are over the head's bytes in a header, over the body cap in a body.
    "noisy floods plans": (
        flood_plans, frozenset({"INVALID_REQUEST", "PAYLOAD_TOO_LARGE", "RATE_LIMITED"})
    ),
    "noisy fills its workspace": (fill_workspaces, frozenset({"SANDBOX_DISK_FULL"})),
    "noisy floods egress (fds)": (flood_egress, frozenset({"egress 429 (RATE_LIMITED)"})),
    "stranger floods connections": (
        flood_connections, frozenset({"RATE_LIMITED", "PAYLOAD_TOO_LARGE"})
    ),
    "stranger floods the audit": (flood_audit, frozenset({"AUTH_REQUIRED"})),
    "noisy forges runner replies": (forge_runner_replies, frozenset({"SANDBOX_OUTPUT_LIMIT"})),
    "noisy upstream answers huge": (huge_upstream_answers, frozenset({"SANDBOX_OUTPUT_LIMIT"})),
}  # fmt: skip

"""`conclave bench isolation`: does a noisy tenant move a victim tenant's service?

A victim tenant calls `echo` (sandboxed, with a time budget) one call after another, first
alone, then while a noisy tenant, on the same gateway, Redis and sandbox backend:

- floods tool calls (16 agents calling `echo` as fast as they are answered);
- holds slow sandboxes (more `sleep` calls at once than the global sandbox cap);
- floods commits with huge read sets (80,000 entries each);
- forges results (tool code that writes its own result frame: a timeout of 1e9 ms);
- fills its workspace (`run_python` writing 320 MiB, past the 256 MiB quota, call after call);
- floods the egress proxy (a tool with network rights opening 64 silent connections per
  call: past its sandbox's caps, the gateway's descriptors are what it would exhaust).

The noisy tenant runs in its own process, as a real tenant's client would. Every call, the
victim's and the noisy tenant's, is made once: no retries, so a refusal the victim gets is
counted, not hidden. Reported per scenario: the victim's success rate, p50 and p99, and p99
against its p99 alone. One more row runs `run_python` as the noisy tenant looking
for the gateway's secret and admin key everywhere a tool can read (its environment, every
`/proc/<pid>/environ`, the data directory) and counts what it found.
"""

from __future__ import annotations

import multiprocessing
import statistics
import time
import uuid
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from functools import partial
from typing import Any

import anyio

from agents import GatewayCallError, GatewayClient
from conclave.bench.stats import percentile
from conclave.bench.suite import BenchContext, Goal, SuiteResult, Table
from conclave.stack import EmbeddedStack
from protocol import ADMIN_KEY_HEADER, AgentRegistration, Budget, CommitRequest, SerfError, Write

TOOL_MODULES = (
    "tools.builtin",
    "tools.harness.misbehaving",
    "tools.harness.hostile",
    "tools.harness.egress",
)
VICTIM_BUDGET_MS = 5_000
GOAL_P99_RATIO = 2.0
Noise = Callable[["Target", float], Coroutine[Any, Any, None]]


def _never_retry(error: SerfError, attempt: int) -> float | None:
    return None


@dataclass(frozen=True)
class Target:
    """The gateway under test, as the noisy tenant's own process reaches it."""

    url: str
    admin_key: str
    pool_max: int


async def _client(target: Target, tenant: str, tools: list[str]) -> GatewayClient:
    """A new agent of `tenant`, registered through the admin API, with its own token."""
    admin = GatewayClient(target.url, admin_key=target.admin_key, retry=_never_retry)
    async with admin:
        registration = AgentRegistration(
            tenant=tenant,
            agent=f"a-{uuid.uuid4().hex[:8]}",
            tools=tools,
            namespaces={f"{tenant}-ns": "write"},
        )
        token = (await admin.register_agent(registration)).token
    return GatewayClient(target.url, token, retry=_never_retry)


async def _victim_calls(victim: GatewayClient, seconds: float) -> tuple[list[float], int]:
    """Echo calls one after another for `seconds`: each call's latency (ms), and failures."""
    latencies: list[float] = []
    failures = 0
    stop = time.monotonic() + seconds
    while time.monotonic() < stop:
        budget = Budget(deadline_ms=int(time.time() * 1000) + VICTIM_BUDGET_MS)
        began = time.perf_counter()
        try:
            await victim.call_tool("echo", {"message": "ping"}, budget=budget)
        except GatewayCallError:
            failures += 1
        latencies.append((time.perf_counter() - began) * 1000)
    return latencies, failures


async def _loop(call: Callable[[], Awaitable[Any]], until: float) -> None:
    while time.monotonic() < until:
        try:
            await call()
        except GatewayCallError:
            await anyio.sleep(0.005)  # a refusal answers at once: don't spin the shared cores


async def _flood_tool_calls(target: Target, until: float) -> None:
    clients = [await _client(target, "noisy", ["echo"]) for _ in range(16)]
    async with anyio.create_task_group() as group:
        for client in clients:
            group.start_soon(_loop, lambda c=client: c.call_tool("echo", {"message": "x"}), until)
    for client in clients:
        await client.aclose()


async def _hold_slow_sandboxes(target: Target, until: float) -> None:
    holders = target.pool_max + 16
    clients = [await _client(target, "noisy", ["sleep"]) for _ in range(holders)]
    async with anyio.create_task_group() as group:
        for client in clients:
            group.start_soon(_loop, lambda c=client: c.call_tool("sleep", {"seconds": 2}), until)
    for client in clients:
        await client.aclose()


async def _huge_read_sets(target: Target, until: float) -> None:
    request = CommitRequest(
        writes=[Write(key="k", value=1)], read_set={f"k{i}": 0 for i in range(80_000)}
    )
    clients = [await _client(target, "noisy", []) for _ in range(4)]
    async with anyio.create_task_group() as group:
        for client in clients:
            group.start_soon(_loop, lambda c=client: c.commit("noisy-ns", request), until)
    for client in clients:
        await client.aclose()


async def _forge_results(target: Target, until: float) -> None:
    clients = [await _client(target, "noisy", ["forge_outcome"]) for _ in range(2)]
    async with anyio.create_task_group() as group:
        for client in clients:
            group.start_soon(_loop, lambda c=client: c.call_tool("forge_outcome", {}), until)
    for client in clients:
        await client.aclose()


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


async def _fill_workspaces(target: Target, until: float) -> None:
    clients = [await _client(target, "noisy", ["run_python"]) for _ in range(2)]
    async with anyio.create_task_group() as group:
        for client in clients:
            fill = partial(client.call_tool, "run_python", {"code": _FILL_WORKSPACE})
            group.start_soon(_loop, fill, until)
    for client in clients:
        await client.aclose()


async def _flood_egress(target: Target, until: float) -> None:
    clients = [await _client(target, "noisy", ["egress_hold_connections"]) for _ in range(4)]
    arguments = {"count": 64, "send_head": False, "hold_s": 1.0}
    async with anyio.create_task_group() as group:
        for client in clients:
            flood = partial(client.call_tool, "egress_hold_connections", arguments)
            group.start_soon(_loop, flood, until)
    for client in clients:
        await client.aclose()


SCENARIOS: dict[str, Noise | None] = {
    "alone": None,
    "noisy floods tool calls": _flood_tool_calls,
    "noisy holds slow sandboxes": _hold_slow_sandboxes,
    "noisy commits huge read sets": _huge_read_sets,
    "noisy forges results": _forge_results,
    "noisy fills its workspace": _fill_workspaces,
    "noisy floods egress connections": _flood_egress,
}

# Run by the noisy tenant's `run_python`: every place a tool could find a gateway secret.
_SNOOP = r"""
import glob, os
seen = [repr(dict(os.environ))]
for path in glob.glob('/proc/*/environ') + glob.glob('/proc/*/cmdline'):
    try:
        seen.append(open(path, 'rb').read().decode(errors='replace'))
    except OSError:
        pass
for root in (os.environ.get('HOME', '/root'), '/root', '/run', '/tmp', '/workspace'):
    for path in glob.glob(root + '/**/*', recursive=True)[:2000]:
        try:
            seen.append(open(path, 'rb').read(4096).decode(errors='replace'))
        except OSError:
            pass
'\n'.join(seen)[:800_000]
"""


def _noise_process(name: str, target: Target, until: float) -> None:
    """The noisy tenant's own process (its own event loop and CPU time, as a real tenant's
    client would have): runs one scenario until `until` (time.monotonic, system-wide)."""
    noise = SCENARIOS[name]
    assert noise is not None
    anyio.run(noise, target, until)


async def _secrets_found(target: Target, stack: EmbeddedStack) -> int:
    snoop = await _client(target, "noisy", ["run_python"])
    async with snoop:
        answer = await snoop.call_tool("run_python", {"code": _SNOOP})
    text = str(answer.result)
    secrets = (stack.settings.secret, stack.settings.admin_key)
    return sum(1 for s in secrets if s is not None and s.get_secret_value() in text)


async def _measure(stack: EmbeddedStack, seconds: float) -> dict[str, Any]:
    admin_key = stack.admin_headers[ADMIN_KEY_HEADER]
    target = Target(stack.url, admin_key, stack.settings.sandbox_pool_max)
    rows: dict[str, tuple[list[float], int]] = {}
    spawn = multiprocessing.get_context("spawn")
    victim = await _client(target, "victim", ["echo"])
    async with victim:
        await _victim_calls(victim, 1.0)  # its sandbox starts warm, as a running agent's is
        for name, noise in SCENARIOS.items():
            if noise is None:
                rows[name] = await _victim_calls(victim, seconds)
                continue
            until = time.monotonic() + seconds + 3.0
            noisy = spawn.Process(target=_noise_process, args=(name, target, until))
            noisy.start()
            await anyio.sleep(2.0)  # the noisy process starts and its noise builds up first
            rows[name] = await _victim_calls(victim, seconds)
            await anyio.to_thread.run_sync(noisy.join)
            await anyio.sleep(2.5)  # the noisy tenant's slow calls end before the next scenario
    return {"rows": rows, "secrets": await _secrets_found(target, stack)}


def run(ctx: BenchContext) -> SuiteResult:
    seconds = 4.0 if ctx.quick else 15.0
    base = ctx.stack.settings
    settings = base.model_copy(update={"port": 0, "tool_modules": TOOL_MODULES})
    task = ctx.progress.add_task("isolation: a victim tenant beside a noisy one", total=1)
    with EmbeddedStack(settings, log_path=ctx.gateway_log("isolation")) as stack:
        measured = anyio.run(_measure, stack, seconds)
    ctx.progress.advance(task)

    table = Table(
        "isolation: the victim tenant's echo calls (ms), alone and beside a noisy tenant",
        ["scenario", "calls", "succeeded", "p50", "p99", "p99 / alone"],
    )
    result = SuiteResult("isolation", tables=[table])
    alone_p99 = percentile(measured["rows"]["alone"][0], 0.99)
    for name, (latencies, failures) in measured["rows"].items():
        calls = len(latencies)
        success = (calls - failures) / calls if calls else 0.0
        p50, p99 = statistics.median(latencies), percentile(latencies, 0.99)
        ratio = p99 / alone_p99
        table.rows.append([name, calls, f"{success:.1%}", p50, p99, f"{ratio:.2f}x"])
        result.figures[f"{name} success"] = success
        result.figures[f"{name} p99_ratio"] = ratio
        result.goals.append(
            Goal(f"{name}: victim calls succeeded", "100%", f"{success:.1%}", success == 1.0)
        )
        if name != "alone":
            result.goals.append(
                Goal(f"{name}: victim p99 / alone", f"<= {GOAL_P99_RATIO:.0f}x",
                     f"{ratio:.2f}x", ratio <= GOAL_P99_RATIO)
            )  # fmt: skip
    found = measured["secrets"]
    backend = ctx.stack.backend.name if ctx.stack.backend else "?"
    result.figures["gateway secrets readable by a tool"] = found
    result.goals.append(
        Goal(f"gateway secrets readable by a tool ({backend})", "0", str(found), found == 0)
    )
    result.notes.append(
        "no call is retried, the victim's nor the noisy tenant's; the victim's sandbox is warm "
        "before the first scenario, as a running agent's would be"
    )
    return result

"""Mutation test of the commit script: each of its checks removed in turn is caught.

The real `commit.lua` marks each check with `-- check: <name>` (one line, or the first and
last line of its block). For every marker the test deletes those lines, runs the mutated
script in a real Redis in place of the store's commit script, drives the workload the check
guards, and shows the removal is noticed: the history checker reports an anomaly, increments
acknowledged to the agents are lost, or a write under a lease the writer does not hold is
applied. The unmutated script passes every workload, so each kill is the removal's doing.
"""

from __future__ import annotations

import dataclasses
import re
import uuid
from collections.abc import Awaitable, Callable

import anyio
import pytest
from redis.asyncio import Redis

from gateway.config import Settings
from gateway.gateway_error import GatewayError
from gateway.redis_io import PooledScript, lua_text
from gateway.state import Actor, StateStore, check_namespace_history
from gateway.state.scripts import COMMIT_SCRIPT
from protocol import CommitRequest, NamespaceConfig, NamespaceMode, Write

pytestmark = pytest.mark.anyio

TENANT = "mut"
AGENTS = 4
INCREMENTS = 3  # each agent's acknowledged increments of the shared counter
MARKER = re.compile(r"--\s*check:\s*(.+?)\s*$")


def _checks(text: str) -> dict[str, list[int]]:
    """Marker name -> the line numbers it covers (a block from its first to its last mark)."""
    marked: dict[str, list[int]] = {}
    for number, line in enumerate(text.splitlines()):
        found = MARKER.search(line)
        if found:
            marked.setdefault(found.group(1), []).append(number)
    return {name: list(range(lines[0], lines[-1] + 1)) for name, lines in marked.items()}


SCRIPT = lua_text(*COMMIT_SCRIPT)
CHECKS = _checks(SCRIPT)


def _without(name: str) -> str:
    dropped = set(CHECKS[name])
    return "\n".join(line for n, line in enumerate(SCRIPT.splitlines()) if n not in dropped)


def _store(redis: Redis, settings: Settings, script: str) -> StateStore:
    store = StateStore.from_settings(redis, settings)
    store.scripts = dataclasses.replace(store.scripts, commit=PooledScript(redis, script))
    return store


async def _namespace(store: StateStore, **config: object) -> str:
    name = f"m{uuid.uuid4().hex[:12]}"
    await store.create_namespace(TENANT, name, NamespaceConfig.model_validate(config))
    return name


def _actor(name: str) -> Actor:
    return Actor(tenant=TENANT, agent=name, session="s1")


async def _refused(store: StateStore, actor: Actor, ns: str, write: Write) -> bool:
    try:
        await store.commit(actor, ns, CommitRequest(writes=[write]))
    except GatewayError:
        return True
    return False


# --- the counter workload: concurrent read-modify-write increments -----------------------


async def counter_workload(store: StateStore, style: str) -> str | None:
    """AGENTS agents each increment one counter INCREMENTS times, all reading before any
    commits (so every round races). Each guards its write with `style`: `expected_version`,
    its `logged read`, or a `read_set`. A refused agent resends the same commit once (as a
    client retrying a timeout does), then reads again. Returns what went wrong, or None."""
    ns = await _namespace(store, validate_reads=style == "logged read")
    acknowledged = 0

    async def one(name: str) -> None:
        nonlocal acknowledged
        actor = _actor(name)
        read = await store.read(actor, ns, "counter")
        write = Write(key="counter", value=(read.value or 0) + 1)
        extra: dict[str, object] = {}
        if style == "expected_version":
            write = Write(key="counter", value=write.value, expected_version=read.version)
        if style == "read_set":
            extra = {"read_set": {"counter": read.version}}
        request = CommitRequest.model_validate({"writes": [write], **extra})
        for _ in range(2):
            try:
                await store.commit(actor, ns, request)
            except GatewayError:
                continue
            acknowledged += 1
            return

    for _ in range(INCREMENTS * AGENTS):
        if acknowledged >= INCREMENTS * AGENTS:
            break
        async with anyio.create_task_group() as group:
            for index in range(AGENTS):
                group.start_soon(one, f"agent{index}")
    report = await check_namespace_history(store.redis, store.keys(TENANT, ns))
    if not report.serializable:
        return "history checker: " + "; ".join(str(a) for a in report.anomalies[:2])
    final = await store.read(_actor("auditor"), ns, "counter")
    if final.value != acknowledged:
        return f"lost updates: {acknowledged} increments acknowledged, counter is {final.value}"
    return None


# --- lease and fencing: a write the lease does not allow must not be applied ---------------


async def _lease(store: StateStore, ns: str, who: str, ttl_ms: int = 10_000) -> int:
    grants = await store.acquire(_actor(who), ns, ["k"], ttl_ms)
    return grants.leases[0].fencing_token


async def own_lease_no_token(store: StateStore, ns: str) -> bool:
    await _lease(store, ns, "a")
    return await _refused(store, _actor("a"), ns, Write(key="k", value=1))


async def own_lease_old_token(store: StateStore, ns: str) -> bool:
    old = await _lease(store, ns, "a")
    await store.release(_actor("a"), ns, "k")
    await _lease(store, ns, "a")
    return await _refused(store, _actor("a"), ns, Write(key="k", value=1, fencing_token=old))


async def others_lease_no_token(store: StateStore, ns: str) -> bool:
    await _lease(store, ns, "a")
    return await _refused(store, _actor("b"), ns, Write(key="k", value=1))


async def others_lease_with_token(store: StateStore, ns: str) -> bool:
    old = await _lease(store, ns, "b")
    await store.release(_actor("b"), ns, "k")
    await _lease(store, ns, "a")
    return await _refused(store, _actor("b"), ns, Write(key="k", value=1, fencing_token=old))


async def expired_lease(store: StateStore, ns: str) -> bool:
    [grant] = (await store.acquire(_actor("a"), ns, ["k"], 30)).leases
    with anyio.fail_after(5):  # until the server's clock is past the lease's expiry
        while True:
            seconds, micros = await store.redis.time()
            if seconds * 1000 + micros // 1000 > grant.expires_at_ms:
                break
            await anyio.sleep(0.01)
    write = Write(key="k", value=1, fencing_token=grant.fencing_token)
    return await _refused(store, _actor("a"), ns, write)


async def released_lease(store: StateStore, ns: str) -> bool:
    token = await _lease(store, ns, "a")
    await store.release(_actor("a"), ns, "k")
    return await _refused(store, _actor("a"), ns, Write(key="k", value=1, fencing_token=token))


async def owned_without_lease(store: StateStore, ns: str) -> bool:
    return await _refused(store, _actor("a"), ns, Write(key="k", value=1))


LeaseScenario = Callable[[StateStore, str], Awaitable[bool]]
LEASE_SCENARIOS: dict[str, tuple[LeaseScenario, NamespaceMode]] = {
    "lease held without its token": (own_lease_no_token, NamespaceMode.OPTIMISTIC),
    "fencing token of an older lease": (own_lease_old_token, NamespaceMode.OPTIMISTIC),
    "lease held by another agent": (others_lease_no_token, NamespaceMode.OPTIMISTIC),
    "fencing token while another agent holds the lease": (
        others_lease_with_token,
        NamespaceMode.OPTIMISTIC,
    ),
    "expired lease": (expired_lease, NamespaceMode.OPTIMISTIC),
    "fencing token of a released lease": (released_lease, NamespaceMode.OPTIMISTIC),
    "owned namespace without a lease": (owned_without_lease, NamespaceMode.OWNED),
}


async def lease_workloads(store: StateStore) -> str | None:
    """Every lease situation; returns the first whose forbidden write was applied."""
    for name, (scenario, mode) in LEASE_SCENARIOS.items():
        ns = await _namespace(store, mode=mode)
        if not await scenario(store, ns):
            return f"a write was applied despite: {name}"
    return None


# --- which workload guards which check --------------------------------------------------

GUARDS: dict[str, Callable[[StateStore], Awaitable[str | None]]] = {
    "expected_version": lambda store: counter_workload(store, "expected_version"),
    "logged read": lambda store: counter_workload(store, "logged read"),
    "read_set": lambda store: counter_workload(store, "read_set"),
    "shown version": lambda store: counter_workload(store, "logged read"),
    **{name: lease_workloads for name in LEASE_SCENARIOS},
}


def test_every_check_in_the_script_is_marked_and_has_a_workload() -> None:
    assert set(CHECKS) == set(GUARDS)


async def test_the_real_script_passes_every_workload(redis: Redis, settings: Settings) -> None:
    store = _store(redis, settings, SCRIPT)
    for style in ("expected_version", "logged read", "read_set"):
        assert await counter_workload(store, style) is None, style
    assert await lease_workloads(store) is None


@pytest.mark.parametrize("check", sorted(GUARDS))
async def test_removing_a_check_is_caught(redis: Redis, settings: Settings, check: str) -> None:
    mutant = _without(check)
    assert mutant != SCRIPT and len(mutant) < len(SCRIPT)
    failure = await GUARDS[check](_store(redis, settings, mutant))
    assert failure is not None, f"the commit script without its {check!r} check went unnoticed"
    if check in ("expected_version", "logged read", "read_set"):
        assert failure.startswith("history checker"), failure

"""Pool behaviour that does not depend on the backend (run on the process backend)."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from dataclasses import replace
from typing import Any

import anyio
import docker
import pytest

from protocol import ErrorCode
from sandbox.instance import Sandbox
from sandbox.pool import SandboxPool
from sandbox.pool.profiles import MEMORY_TIERS_MB, RUNNER_OVERHEAD_MB, profile_for
from tests.helpers import until
from tests.sandbox.conftest import (
    ALL_BACKENDS,
    DEFAULT_LIMITS,
    ISOLATING,
    PoolFactory,
    invocation,
    processes_mentioning,
)
from tools.calls import CallLimits, SubscriptionHold

pytestmark = pytest.mark.anyio


async def test_a_runner_that_died_while_idle_is_replaced_transparently(
    make_pool: PoolFactory,
) -> None:
    pool = await make_pool("process")
    first = await pool.execute(invocation("whoami"))
    (idle,) = [s for sandboxes in pool._idle.values() for s in sandboxes]
    os.kill(idle.hello["pid"], signal.SIGKILL)
    with anyio.fail_after(10):
        while await idle.launched.exit_reason() is None:  # noqa: ASYNC110 (a process exit)
            await anyio.sleep(0.005)
    second = await pool.execute(invocation("whoami"))
    assert second.ok and second.usage.sandbox != first.usage.sandbox
    assert pool.started == 2


async def test_prewarm_makes_the_first_call_warm(make_pool: PoolFactory) -> None:
    pool = await make_pool("process")
    limits = CallLimits(memory_mb=256, cpu_seconds=10, timeout_ms=10_000, max_output_bytes=1024)
    await pool.prewarm("acme", "alice", limits)
    assert pool.started == 1
    outcome = await pool.execute(invocation("whoami"))
    assert outcome.ok and pool.started == 1


def test_profiles_round_memory_up_to_a_tier_plus_the_runner() -> None:
    small = CallLimits(memory_mb=64, cpu_seconds=1, timeout_ms=1000, max_output_bytes=1)
    large = CallLimits(memory_mb=300, cpu_seconds=1, timeout_ms=1000, max_output_bytes=1)
    assert profile_for(small).memory_mb == MEMORY_TIERS_MB[0] + RUNNER_OVERHEAD_MB
    assert profile_for(large).memory_mb == MEMORY_TIERS_MB[1] + RUNNER_OVERHEAD_MB
    assert profile_for(small) == profile_for(small) != profile_for(large)


async def test_a_tenant_with_many_waiters_cannot_starve_one_with_a_single_waiter(
    make_pool: PoolFactory,
) -> None:
    pool = await make_pool("process", pool_max=2, tenant_max=2, agent_max=2, queue_ms=10_000)
    finished: list[str] = []

    async def call(name: str, tenant: str, seconds: float) -> None:
        outcome = await pool.execute(invocation("sleep", {"seconds": seconds}, tenant=tenant))
        assert outcome.ok, outcome.error
        finished.append(name)

    async with anyio.create_task_group() as group:
        for i in range(2):  # the noisy tenant holds every sandbox ...
            group.start_soon(call, f"holder-{i}", "noisy", 1.0)
        with anyio.fail_after(30):
            while len(pool._busy) < 2:  # noqa: ASYNC110 (polling the pool's own state)
                await anyio.sleep(0.005)
        for i in range(5):  # ... and queues five more before the victim's one call
            group.start_soon(call, f"noisy-{i}", "noisy", 1.0)
        with anyio.fail_after(5):
            while pool._queue.waiting("noisy") < 5:  # noqa: ASYNC110
                await anyio.sleep(0.005)
        group.start_soon(call, "victim", "victim", 0.0)
    queued = [name for name in finished if not name.startswith("holder")]
    # Round robin by tenant: the second sandbox to free up goes to the victim, not to the
    # noisy tenant's second waiter (first come, first served would make it wait for all five).
    assert queued.index("victim") < 2, queued


async def test_a_queued_call_leaves_at_its_deadline_and_a_full_queue_refuses_at_once(
    make_pool: PoolFactory,
) -> None:
    pool = await make_pool("process", pool_max=1, queue_ms=10_000, queue_max=1)
    holder = invocation("sleep", {"seconds": 3.0}, tenant="noisy")
    async with anyio.create_task_group() as group:
        group.start_soon(pool.execute, holder)
        with anyio.fail_after(30):
            while not pool._busy:  # noqa: ASYNC110 (polling the pool's own state)
                await anyio.sleep(0.005)
        soon = int(time.time() * 1000) + 300
        late = invocation("whoami", tenant="victim")
        late = replace(late, context=late.context.model_copy(update={"deadline_ms": soon}))
        began = time.monotonic()
        timed_out = await pool.execute(late)
        assert timed_out.error is not None
        assert timed_out.error.code == ErrorCode.DEADLINE_EXCEEDED
        assert time.monotonic() - began < 1.5  # at its deadline, not after the queue wait
        assert pool._queue.waiting("victim") == 0

        group.start_soon(pool.execute, invocation("whoami", tenant="noisy", agent="bob"))
        with anyio.fail_after(5):
            while pool._queue.waiting("noisy") < 1:  # noqa: ASYNC110
                await anyio.sleep(0.005)
        began = time.monotonic()
        refused = await pool.execute(invocation("whoami", tenant="noisy", agent="carol"))
        assert time.monotonic() - began < 0.5  # the tenant's queue is full: no wait
        assert refused.error is not None
        assert refused.error.code == ErrorCode.SANDBOX_UNAVAILABLE
        assert refused.error.retryable and refused.error.retry_after_ms
        assert "CONCLAVE_SANDBOX_QUEUE_MAX" in refused.error.message


async def test_an_agent_past_its_share_is_refused_after_the_queue_wait(
    make_pool: PoolFactory,
) -> None:
    pool = await make_pool("process", pool_max=4, queue_ms=300)  # agent share: 1, tenant: 2
    async with anyio.create_task_group() as group:
        group.start_soon(pool.execute, invocation("sleep", {"seconds": 3.0}))
        with anyio.fail_after(30):
            while not pool._busy:  # noqa: ASYNC110 (polling the pool's own state)
                await anyio.sleep(0.005)
        began = time.monotonic()
        refused = await pool.execute(invocation("whoami"))
        assert time.monotonic() - began >= 0.3
        assert refused.error is not None
        assert refused.error.code == ErrorCode.SANDBOX_UNAVAILABLE
        assert refused.error.retryable and refused.error.retry_after_ms
        assert "CONCLAVE_SANDBOX_AGENT_MAX" in refused.error.message
        other_agent = await pool.execute(invocation("whoami", agent="bob"))
        assert other_agent.ok, other_agent.error


async def test_room_is_made_from_the_tenant_holding_most_not_a_small_tenants_warm_one(
    make_pool: PoolFactory,
) -> None:
    pool = await make_pool("process", pool_max=3, tenant_max=3, agent_max=1)
    victim = await pool.execute(invocation("whoami", tenant="small", agent="v"))
    for agent in ("n1", "n2"):  # the noisy tenant fills the pool, then goes idle
        assert (await pool.execute(invocation("whoami", tenant="noisy", agent=agent))).ok
    assert (await pool.execute(invocation("whoami", tenant="noisy", agent="n3"))).ok
    again = await pool.execute(invocation("whoami", tenant="small", agent="v"))
    assert again.ok and again.usage.sandbox == victim.usage.sandbox  # still warm


async def _ready_spare(pool: SandboxPool) -> Sandbox:
    """The pool's one spare, once it has started."""
    with anyio.fail_after(30):
        while not pool.ready_spares:  # noqa: ASYNC110 (polling the pool's own state)
            await anyio.sleep(0.005)
    (spare,) = pool._spares.ready.values()
    return spare


@pytest.mark.parametrize("backend", ALL_BACKENDS)
async def test_a_new_identitys_first_call_takes_the_spare_and_a_new_one_starts_after(
    backend: str, make_pool: PoolFactory
) -> None:
    pool = await make_pool(backend, spares=None)  # a spare of the last cold start's profile
    assert pool.ready_spares == 0  # nobody called yet: no spare
    alice = await pool.execute(invocation("whoami"))
    spare = await _ready_spare(pool)
    assert alice.ok and pool.started == 2 and spare.label != alice.usage.sandbox
    bob = await pool.execute(invocation("whoami", agent="bob"))
    assert bob.ok and bob.result["agent"] == "bob", bob.error
    assert bob.usage.sandbox == spare.label and pool.started == 2  # nothing started for bob
    assert (spare.spec.tenant, spare.spec.agent) == ("acme", "bob")  # bob's sandbox now
    after = await _ready_spare(pool)
    assert after is not spare and pool.started == 3
    again = await pool.execute(invocation("whoami", agent="bob"))
    assert again.usage.sandbox == spare.label  # bob keeps it warm; the new spare waits


async def test_a_spare_serves_one_identity_only(make_pool: PoolFactory) -> None:
    pool = await make_pool("process", spares=None)
    served: dict[str, set[str]] = {}
    for agent in ("a0", "a1", "a2", "a0", "a1", "a2"):
        if pool.started:
            await _ready_spare(pool)
        outcome = await pool.execute(invocation("whoami", agent=agent))
        assert outcome.ok and outcome.usage.sandbox, outcome.error
        served.setdefault(outcome.usage.sandbox, set()).add(outcome.result["agent"])
    assert sorted(map(sorted, served.values())) == [["a0"], ["a1"], ["a2"]]
    assert (await _ready_spare(pool)).label not in served  # the next spare is nobody's yet
    assert pool.started == 4


async def test_a_spare_is_evicted_first_and_never_evicts(make_pool: PoolFactory) -> None:
    pool = await make_pool("process", pool_max=3, tenant_max=3, agent_max=1, spares=None)
    alice = await pool.execute(invocation("whoami"))
    await _ready_spare(pool)
    bob = await pool.execute(invocation("whoami", agent="bob"))
    spare = await _ready_spare(pool)
    assert pool.size == 3
    # A call of another profile has no spare to take: room is made from the spare, not from
    # alice's or bob's warm sandbox.
    carol = await pool.execute(invocation("whoami", agent="carol", memory_mb=1024))
    assert carol.ok and spare.closed
    for before in (alice, bob):
        again = await pool.execute(invocation("whoami", agent=before.result["agent"]))
        assert again.usage.sandbox == before.usage.sandbox  # still warm
    # The pool is full: no spare of carol's profile starts (a spare never makes room).
    assert pool.size == 3 and pool.ready_spares == 0 and pool.started == 4


async def test_configured_spares_start_for_the_tenant_of_the_last_cold_start(
    make_pool: PoolFactory,
) -> None:
    """A spare is a tenant's (started in its cgroup), so none starts before a tenant's cold
    start says whose; then one of each configured profile, which only its agents take."""
    pool = await make_pool("process", spares=(DEFAULT_LIMITS.memory_mb, 1024))
    first = await pool.execute(invocation("whoami"))  # acme's cold start
    await until(lambda: pool.ready_spares == 2, 30)
    assert {s.spec.tenant for s in pool._spares.ready.values()} == {"acme"}
    acmes = {s.label for s in pool._spares.ready.values()}
    bob = await pool.execute(invocation("whoami", agent="bob", memory_mb=1024))
    assert bob.ok and pool.started == 3  # acme's spare of that profile: no start for bob
    carol = await pool.execute(invocation("whoami", tenant="globex", agent="carol"))
    assert carol.ok and carol.usage.sandbox not in {first.usage.sandbox, *acmes}  # her own


@pytest.mark.parametrize("backend", ISOLATING)
async def test_nothing_is_left_after_the_pool_closes_with_spares(
    backend: str, make_pool: PoolFactory
) -> None:
    pool = await make_pool(backend, spares=None)
    await pool.execute(invocation("whoami"))
    await _ready_spare(pool)
    await pool.execute(invocation("whoami", agent="bob"))  # takes the spare; another starts
    root = pool.workspace_root
    with anyio.fail_after(30):
        while len(ids := {p.name for p in root.glob("sbx-*") if p.is_dir()}) < 3:  # noqa: ASYNC110
            await anyio.sleep(0.005)
    await pool.aclose()  # while the new spare may still be starting
    assert processes_mentioning(str(root)) == []
    assert not any(root.iterdir())
    if backend == "docker":
        client = docker.DockerClient(base_url=pool.backend.docker_host)  # type: ignore[attr-defined]
        try:
            mine = client.containers.list(
                ignore_removed=True,
                all=True,
                filters={"label": f"conclave.owner_pid={os.getpid()}"},
            )
            assert not {c.labels["conclave.sandbox_id"] for c in mine} & ids
        finally:
            client.close()


def _recorded_launches(pool: SandboxPool) -> list[tuple[str, float]]:
    """The list the pool's backend records each launch in from now on: (tenant, when)."""
    launches: list[tuple[str, float]] = []
    launch = pool.backend.launch

    async def recorded(spec: Any) -> Any:
        launches.append((spec.tenant, time.monotonic()))
        return await launch(spec)

    pool.backend.launch = recorded  # type: ignore[method-assign]
    return launches


async def test_a_tenants_cold_starts_go_one_at_a_time_and_never_hold_up_another_tenants(
    make_pool: PoolFactory,
) -> None:
    """A tenant cycling calls through many agents needs a cold start for each; the start's
    CPU is in no tenant's share, so its starts run one at a time (the rest wait in the
    queue), while another tenant's first call starts its sandbox beside them (issue 26)."""
    pool = await make_pool(
        "process", pool_max=8, tenant_max=4, agent_max=1, queue_ms=30_000,
        tenant_starts_max=1, spares=[],
    )  # fmt: skip
    launches = _recorded_launches(pool)
    ready: dict[str, tuple[float, float]] = {}  # per agent: its launch began, its sandbox ready

    async def call(tenant: str, agent: str) -> None:
        began = time.monotonic()
        outcome = await pool.execute(invocation("whoami", tenant=tenant, agent=agent))
        assert outcome.ok, outcome.error
        assert outcome.waited_ms is not None
        ready[agent] = (began, began + outcome.waited_ms / 1000)

    async with anyio.create_task_group() as group:
        for i in range(4):
            group.start_soon(call, "noisy", f"n{i}")
        with anyio.fail_after(10):
            while not launches:  # noqa: ASYNC110 (polling the pool's own state)
                await anyio.sleep(0.005)
        group.start_soon(call, "victim", "v")
    noisy_launches = sorted(at for tenant, at in launches if tenant == "noisy")
    noisy_ready = sorted(ready[f"n{i}"][1] for i in range(4))
    assert len(noisy_launches) == 4
    for launched, previous_ready in zip(noisy_launches[1:], noisy_ready, strict=False):
        assert launched >= previous_ready - 0.05  # each start after the previous one's end
    (victim_launch,) = [at for tenant, at in launches if tenant == "victim"]
    assert victim_launch < noisy_ready[-2]  # not queued behind the noisy tenant's starts


async def test_a_tenant_past_its_burst_of_starts_begins_them_at_its_rate_alone(
    make_pool: PoolFactory,
) -> None:
    """A tenant whose agents outnumber its share turns calls into cold starts, whose CPU no
    tenant's share bounds: past a burst of its share's worth it begins them at its start
    rate (the calls wait in the queue for their turn), while another tenant starts at once."""
    pool = await make_pool(
        "process", pool_max=12, tenant_max=4, agent_max=1, queue_ms=5_000,
        tenant_start_rate_per_s=1.0, spares=[],
    )  # fmt: skip
    launches = _recorded_launches(pool)

    async def call(tenant: str, agent: str) -> None:
        outcome = await pool.execute(invocation("whoami", tenant=tenant, agent=agent))
        assert outcome.ok, outcome.error

    async with anyio.create_task_group() as group:
        for i in range(6):
            group.start_soon(call, "noisy", f"n{i}")
        await until(lambda: len(launches) >= 4, 10)
        group.start_soon(call, "victim", "v")
    noisy = sorted(at for tenant, at in launches if tenant == "noisy")
    assert len(noisy) == 6
    assert noisy[3] - noisy[0] < 0.5  # its share's worth at once
    assert noisy[4] - noisy[0] >= 0.9  # then one a second
    assert noisy[5] - noisy[0] >= 1.9
    (victim,) = [at for tenant, at in launches if tenant == "victim"]
    assert victim < noisy[4]  # the other tenant's start waited for none of them

    fast = await make_pool(
        "process", pool_max=12, tenant_max=2, agent_max=1, tenant_start_rate_per_s=0.5,
        spares=[],
    )  # fmt: skip
    for i in range(2):
        assert (await fast.execute(invocation("whoami", tenant="noisy", agent=f"n{i}"))).ok
    refused = await fast.execute(invocation("whoami", tenant="noisy", agent="n2"))
    assert refused.error is not None
    assert refused.error.code == ErrorCode.SANDBOX_UNAVAILABLE
    assert refused.error.retryable
    assert "CONCLAVE_SANDBOX_TENANT_START_RATE_PER_S" in refused.error.message


async def test_the_call_after_a_recycle_finds_its_successor_warm(make_pool: PoolFactory) -> None:
    """A sandbox is recycled after `recycle_after` calls; its successor starts a tenth of
    that ahead, so an agent in service never meets a cold start on the call after."""
    pool = await make_pool("process", recycle_after=10, spares=[])
    for _ in range(10):
        outcome = await pool.execute(invocation("whoami"))
        assert outcome.ok, outcome.error
    await until(lambda: pool.started == 2, 30)  # begun after the 9th call, not by a call

    def successor_idle() -> bool:  # started, then checked in warm (a moment later)
        return pool.tenant_stats().get("acme", (0, 0, 0))[1] == 1

    await until(successor_idle, 30)
    assert pool.recycled == 1
    after = await pool.execute(invocation("whoami"))
    assert after.ok, after.error
    assert pool.started == 2  # the 11th call started nothing
    assert after.waited_ms is not None and after.waited_ms < 100


async def test_a_call_whose_deadline_ends_in_a_cold_start_leaves_the_sandbox_warm(
    make_pool: PoolFactory,
) -> None:
    """The caller answers at its deadline; the start goes on in the pool's task group and
    the identity's next call finds that sandbox warm."""
    pool = await make_pool("process")
    hurried = invocation("whoami")
    soon = int(time.time() * 1000) + 20  # a runner's start takes longer than 20 ms
    hurried = replace(hurried, context=hurried.context.model_copy(update={"deadline_ms": soon}))
    began = time.monotonic()
    too_late = await pool.execute(hurried)
    assert too_late.error is not None and too_late.error.code == ErrorCode.DEADLINE_EXCEEDED
    assert time.monotonic() - began < 0.5  # at its deadline, not after the start
    await until(lambda: sum(map(len, pool._idle.values())) == 1, timeout_s=30)
    warm = await pool.execute(invocation("whoami"))
    assert warm.ok and pool.started == 1


async def test_a_retry_right_after_a_missed_deadline_waits_for_that_start_not_another(
    make_pool: PoolFactory,
) -> None:
    """An agent that retries at once (as the SDK does after DEADLINE_EXCEEDED) gets the
    sandbox its first call started; it does not start a second one, which under load would
    miss its deadline too and, call after call, fill the tenant's share with starts."""
    pool = await make_pool("process", pool_max=4, tenant_max=1)
    hurried = invocation("whoami")
    soon = int(time.time() * 1000) + 20  # a runner's start takes longer than 20 ms
    hurried = replace(hurried, context=hurried.context.model_copy(update={"deadline_ms": soon}))
    too_late = await pool.execute(hurried)
    assert too_late.error is not None and too_late.error.code == ErrorCode.DEADLINE_EXCEEDED
    retry = await pool.execute(invocation("whoami"))
    assert retry.ok, retry.error
    assert pool.started == 1


async def test_a_hedge_never_starts_a_second_sandbox_while_its_call_waits_for_the_first(
    make_pool: PoolFactory,
) -> None:
    """A hedge of a call still in its cold start is refused at once: a second start would end
    after the first, and under load each slow first call's hedge took another place of the
    tenant's share, until the tenant's other agents were refused (the gateway bench's c=16)."""
    pool = await make_pool("process", pool_max=8, tenant_max=4)
    async with anyio.create_task_group() as group:
        group.start_soon(pool.execute, invocation("whoami"))
        await until(lambda: pool._shares.starting == 1, timeout_s=10)
        hedge = replace(invocation("whoami"), may_queue=False)
        refused = await pool.execute(hedge)
    assert refused.error is not None and refused.error.code == ErrorCode.SANDBOX_UNAVAILABLE
    assert pool.started == 1
    warm_hedge = await pool.execute(replace(invocation("whoami"), may_queue=False))
    assert warm_hedge.ok and pool.started == 1  # a warm sandbox of its identity: it runs


async def test_an_open_pool_reaps_by_itself_and_its_close_leaves_no_task(
    make_pool: PoolFactory,
) -> None:
    """Nobody runs a reaper beside the pool: opening it starts one in its task group, and
    closing it ends everything the pool started."""
    before = asyncio.all_tasks()
    pool = await make_pool("process", idle_s=0.2)
    assert (await pool.execute(invocation("whoami"))).ok and pool.size == 1
    await until(lambda: pool.size == 0, timeout_s=10)  # torn down idle, by the pool itself
    await pool.aclose()
    assert asyncio.all_tasks() - before == set()


async def test_a_held_sandbox_outlives_its_idle_time_only_while_held(
    make_pool: PoolFactory,
) -> None:
    """A call that subscribed (its `hold`) keeps its sandbox from idle reaping for the hold's
    time, and no longer: a subscription never pins a sandbox for good. The watch of the
    held sandbox is stopped by its next call, and ends with the pool (no task is left)."""
    before = asyncio.all_tasks()
    pool = await make_pool("process", idle_s=0.1)
    hold = SubscriptionHold(1.0, lambda source, message: None)
    held = await pool.execute(replace(invocation("whoami"), hold=hold))
    assert held.ok, held.error
    await anyio.sleep(0.3)  # past the idle time, within the hold (time passing: no event)
    assert await pool.reap_idle() == 0 and pool.size == 1
    again = await pool.execute(invocation("whoami"))  # stops the idle watch first
    assert again.ok and again.usage.sandbox == held.usage.sandbox
    await until(lambda: pool.size == 0, timeout_s=10)  # the hold over: reaped as idle
    await pool.aclose()
    assert asyncio.all_tasks() - before == set()

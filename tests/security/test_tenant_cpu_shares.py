"""Attack: one tenant runs many CPU burners at once, one per sandbox (issue 26).

Before the tenant cgroup parents, each sandbox was a sibling of every other under one parent,
so the kernel shared the CPU per sandbox: a tenant with six burners got six shares for the
victim's one, and the victim's CPU-bound call ran at a fraction of its speed alone. Now each
tenant's sandboxes sit in the tenant's own group (bwrap: `conclave/tenant-<t>/<sandbox>`;
docker: the container's cgroup parent), every tenant's group has the same shares, and the
victim's call keeps within VICTIM_MAX_RATIO of its time alone.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import docker
import httpx
import pytest

from gateway.assembly import create_app
from gateway.config import Settings
from gateway.http.gateway_parts import gateway_parts
from gateway.identity.tokens import issue_token
from sandbox import SandboxPool
from sandbox.backends.cgroup import CGROUP_ROOT, TENANT_CPU_SHARES, tenant_group
from tests.helpers import until

pytestmark = [pytest.mark.anyio, pytest.mark.serial]  # a CPU-time ratio: alone on the machine

BURNERS = 6  # the noisy tenant's sandboxes, each burning a core's quota
VICTIM_MAX_RATIO = 2.0  # the victim's CPU-bound call under the flood / alone (main: ~3.5x)
# A fixed amount of work: ~0.3 s of one core here.
WORK = "n = 0\nfor i in range(3_000_000):\n    n += i\nn"


@pytest.fixture(params=["bwrap", "docker"])
async def gateway(
    request: pytest.FixtureRequest, redis_url: str
) -> AsyncIterator[tuple[httpx.AsyncClient, Settings, SandboxPool]]:
    request.getfixturevalue("docker_engine" if request.param == "docker" else "bwrap_available")
    settings = Settings(
        redis_url=redis_url,
        port=0,
        sandbox_backend=request.param,
        sandbox_pool_max=2 * (BURNERS + 2),
        tool_modules=("tools.builtin", "tools.harness.misbehaving"),
        secret="cpu-shares-suite-secret-" + "x" * 32,
    )
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(
            transport=transport, base_url="http://localhost", timeout=120
        ) as client:
            pool = gateway_parts(app).executor
            assert isinstance(pool, SandboxPool)
            yield client, settings, pool


def _bearer(settings: Settings, tenant: str, agent: str) -> dict[str, str]:
    token = issue_token(settings, tenant=tenant, agent=agent, scopes=["tool:*"])
    return {"Authorization": f"Bearer {token}"}


def _cpu_group(tenant: str) -> Path:
    return CGROUP_ROOT / "cpu" / tenant_group(tenant)


def _sandboxes_of(tenant: str) -> int:
    group = _cpu_group(tenant)
    return len([d for d in group.iterdir() if d.is_dir()]) if group.is_dir() else 0


def _sandbox_group(settings: Settings, sandbox: str) -> Path:
    """Where the sandbox (`backend:id` of a call's usage) sits in the cpu hierarchy."""
    backend, _, sandbox_id = sandbox.partition(":")
    if backend == "bwrap":
        found = list((CGROUP_ROOT / "cpu").glob(f"conclave/*/{sandbox_id}"))
    else:
        client = docker.DockerClient(base_url=settings.docker_host)
        try:
            (container,) = client.containers.list(
                ignore_removed=True, filters={"label": f"conclave.sandbox_id={sandbox_id}"}
            )
            parent = container.attrs["HostConfig"]["CgroupParent"]
        finally:
            client.close()
        found = [CGROUP_ROOT / "cpu" / parent.strip("/") / container.id]
    assert len(found) == 1 and found[0].is_dir(), found
    return found[0]


async def test_a_tenants_cpu_burners_share_one_tenants_cpu(
    gateway: tuple[httpx.AsyncClient, Settings, SandboxPool],
) -> None:
    client, settings, _ = gateway

    async def victim_call() -> tuple[float, str]:
        began = time.perf_counter()
        answer = await client.post(
            "/v1/tools/run_python/call",
            json={"arguments": {"code": WORK}},
            headers=_bearer(settings, "victim", "v"),
        )
        assert answer.status_code == 200, answer.text
        return time.perf_counter() - began, answer.json()["usage"]["sandbox"]

    _, sandbox = await victim_call()  # its sandbox starts warm, as a running agent's is
    alone = statistics.median([(await victim_call())[0] for _ in range(3)])

    async def burn(agent: str) -> None:
        await client.post(
            "/v1/tools/spin/call",
            json={"arguments": {"seconds": 30}},
            headers=_bearer(settings, "noisy", agent),
        )

    async with anyio.create_task_group() as group:
        for i in range(BURNERS):
            group.start_soon(burn, f"burner-{i}")
        # Every burner's sandbox runs in the noisy tenant's group.
        await until(lambda: _sandboxes_of("noisy") >= BURNERS, 60, poll_s=0.05)
        await anyio.sleep(1.0)  # the burners' calls are running, not starting
        flooded = statistics.median([(await victim_call())[0] for _ in range(3)])
        # The layout: each tenant's sandboxes in its own group, the groups' shares equal.
        victim_group = _sandbox_group(settings, sandbox).parent
        shares = {t: int((_cpu_group(t) / "cpu.shares").read_text()) for t in ("victim", "noisy")}
        group.cancel_scope.cancel()

    assert victim_group == _cpu_group("victim")
    assert shares == {"victim": TENANT_CPU_SHARES, "noisy": TENANT_CPU_SHARES}
    assert flooded <= VICTIM_MAX_RATIO * alone, (
        f"the victim's call took {flooded:.2f} s under the flood, {alone:.2f} s alone"
    )


async def test_every_sandbox_runs_in_its_own_tenants_group_spares_too(
    gateway: tuple[httpx.AsyncClient, Settings, SandboxPool],
) -> None:
    """A spare is started for the tenant whose cold start called for it, in its group, and
    only that tenant's agents take it. Before, a spare was nobody's (`tenant-` with no
    name) and stayed in that group when any tenant's new agent took it: under the isolation
    flood the victim's sandbox and the attacker's shared it, and no tenant share held."""
    client, settings, pool = gateway

    async def first_call(tenant: str, agent: str) -> str:
        headers = _bearer(settings, tenant, agent)
        answer = await client.post("/v1/tools/whoami/call", json={"arguments": {}}, headers=headers)
        assert answer.status_code == 200, answer.text
        assert answer.json()["result"]["tenant"] == tenant
        sandbox: str = answer.json()["usage"]["sandbox"]
        return sandbox

    def spare_of(tenant: str) -> bool:
        return any(spare.spec.tenant == tenant for spare in pool._spares.ready.values())

    placed: list[tuple[str, str]] = []
    for tenant, agent in [("victim", "v1"), ("noisy", "n1"), ("noisy", "n2"), ("victim", "v2")]:
        placed.append((tenant, await first_call(tenant, agent)))
        await until(lambda tenant=tenant: spare_of(tenant), 30, poll_s=0.05)  # started for it
    for tenant, sandbox in placed:
        assert _sandbox_group(settings, sandbox).parent == _cpu_group(tenant), (tenant, sandbox)
    # Cold starts: v1, n1, v2 (noisy's spare is not the victim's); n2 took noisy's spare; a
    # spare after each of the four calls.
    assert pool.started == 7

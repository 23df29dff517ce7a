"""A tenant's cgroup goes with its last sandbox, from every hierarchy.

Docker's runtime makes a container's parent group (the tenant's, `conclave/tenant-<t>`) in
each v1 hierarchy mounted, blkio, devices and cpuset among them, and leaves it behind when the
container goes; the gateway removed it only from the hierarchies it writes limits in, so each
tenant ever served left empty groups behind (161 here after a few days of tests)."""

from __future__ import annotations

import uuid

import pytest

from sandbox.backends.cgroup import CGROUP_ROOT, tenant_group
from tests.sandbox.conftest import ISOLATING, PoolFactory, invocation

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("backend_name", ISOLATING)
async def test_a_tenants_group_is_gone_from_every_hierarchy_with_its_last_sandbox(
    backend_name: str, make_pool: PoolFactory
) -> None:
    tenant = f"gone-{uuid.uuid4().hex[:8]}"
    pool = await make_pool(backend_name)
    outcome = await pool.execute(invocation("whoami", tenant=tenant))
    assert outcome.ok, outcome.error
    group = tenant_group(tenant)
    hierarchies = [CGROUP_ROOT, *CGROUP_ROOT.iterdir()]  # v2's root, or each v1 hierarchy
    assert any((h / group).is_dir() for h in hierarchies)  # its sandbox ran in it
    await pool.aclose()
    assert [h.name for h in hierarchies if (h / group).exists()] == []

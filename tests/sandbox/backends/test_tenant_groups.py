"""A tenant's cgroup outlives each gateway process's last sandbox of it while another gateway
process on the host still has one: removing it then raced with that process's next start,
whose container the engine refused (`test_runner_boundary`'s flooding test, once in CI)."""

from __future__ import annotations

import secrets
import subprocess
import sys
from pathlib import Path

from sandbox.backends.cgroup import TenantGroups, ensure_tenant_cgroup, tenant_cgroup_dirs

ANOTHER_GATEWAY = """
import sys
from pathlib import Path
from sandbox.backends.cgroup import TenantGroups, ensure_tenant_cgroup
groups, tenant = TenantGroups(Path(sys.argv[1])), sys.argv[2]
groups.enter(tenant)
ensure_tenant_cgroup(tenant)
print("has a sandbox", flush=True)
sys.stdin.readline()
groups.leave(tenant)
print("has none", flush=True)
"""


def _groups_there(tenant: str) -> list[bool]:
    return [path.is_dir() for path in tenant_cgroup_dirs(tenant).values()]


def test_the_tenants_group_stays_until_the_hosts_last_sandbox_of_it_is_gone(
    tmp_path: Path,
) -> None:
    tenant = f"groups-{secrets.token_hex(4)}"
    with subprocess.Popen(
        [sys.executable, "-c", ANOTHER_GATEWAY, str(tmp_path), tenant],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    ) as another:
        assert another.stdin is not None and another.stdout is not None
        try:
            assert another.stdout.readline().strip() == "has a sandbox"
            mine = TenantGroups(tmp_path)
            mine.enter(tenant)
            mine.enter(tenant)
            ensure_tenant_cgroup(tenant)
            mine.leave(tenant)
            mine.leave(tenant)  # this process's last: the other's sandbox keeps the group
            assert _groups_there(tenant) == [True] * len(_groups_there(tenant))
            another.stdin.write("\n")
            another.stdin.flush()
            assert another.stdout.readline().strip() == "has none"
            assert not any(_groups_there(tenant))
        finally:
            another.kill()
            for path in tenant_cgroup_dirs(tenant).values():
                if path.is_dir():
                    path.rmdir()

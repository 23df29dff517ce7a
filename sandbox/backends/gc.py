"""Find and remove what a crashed gateway left behind: containers, cgroups, workspaces."""

from __future__ import annotations

import contextlib
import os
import signal
from pathlib import Path

from docker.errors import DockerException

from sandbox.backends.cgroup import (
    CGROUP_ROOT,
    GROUP_PARENT,
    TENANT_GROUPS,
    V1_CONTROLLERS,
    cgroup_v2,
)
from sandbox.backends.docker import remove_orphans
from sandbox.instance import abandoned_workspaces, remove_workspace


def _cgroup_dirs() -> list[Path]:
    """Every sandbox's group, then every tenant's (`conclave/tenant-<t>/<sandbox>`), so a
    tenant's group is tried once its sandboxes' are gone. A group directly under
    `conclave/` is a sandbox's of the layout before tenant groups."""
    parents = (
        [CGROUP_ROOT / GROUP_PARENT]
        if cgroup_v2()
        else [CGROUP_ROOT / c / GROUP_PARENT for c in V1_CONTROLLERS]
    )
    top = [d for parent in parents for d in _groups_in(parent)]
    tenants = [d for d in top if d.name.startswith("tenant-")]
    sandboxes = [d for tenant in tenants for d in _groups_in(tenant)]
    return sandboxes + [d for d in top if d not in tenants] + tenants


def _groups_in(parent: Path) -> list[Path]:
    """The groups in `parent` (none if it went meanwhile: other gateways remove theirs)."""
    with contextlib.suppress(OSError):
        return [d for d in parent.iterdir() if d.is_dir()]
    return []


def _holds_groups(group: Path) -> bool:
    with contextlib.suppress(OSError):
        return any(child.is_dir() for child in group.iterdir())
    return False


def collect_orphans(docker_host: str, *, include_live_owners: bool = False) -> list[str]:
    """Remove orphans; returns one line per thing removed (or why something could not be)."""
    report: list[str] = []
    try:
        removed = remove_orphans(docker_host, include_live_owners=include_live_owners)
        report += [f"removed container {name}" for name in removed]
    except DockerException as exc:
        report.append(f"docker skipped: engine not reachable at {docker_host} ({exc})")
    # A bwrap sandbox dies with its gateway (--die-with-parent); empty groups may remain.
    for group in _cgroup_dirs():
        if _holds_groups(group):
            continue  # a tenant's group that still holds a live sandbox's
        tenant = group.name.removeprefix("tenant-") if group.parent.name == GROUP_PARENT else ""
        if tenant and group.name != tenant and TENANT_GROUPS.held_elsewhere(tenant):
            continue  # a gateway is making a sandbox in it
        pids = []
        with contextlib.suppress(OSError):
            pids = [int(p) for p in (group / "cgroup.procs").read_text().split()]
        if pids and not include_live_owners:
            continue
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        try:
            group.rmdir()
            report.append(f"removed cgroup {group}")
        except OSError as exc:
            report.append(f"cgroup {group} still busy: {exc}")
    for workspace in abandoned_workspaces(include_live_owners=include_live_owners):
        remove_workspace(workspace)
        report.append(f"removed workspace {workspace}")
    return report or ["nothing to remove"]

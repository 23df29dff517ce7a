"""`SandboxConfig`: what an operator sets about sandboxes and the warm pool, as one frozen value.

The gateway's settings hold it as `settings.sandbox`; each field keeps the flat name it has
always had, `sandbox_` + its name (`CONCLAVE_SANDBOX_POOL_MAX` is `sandbox.pool_max`). Where
the Docker engines are and which tool modules the runner imports are not here: the CLI and
the gateway's tool registry read them too, so they stay beside this in the settings.
"""

from __future__ import annotations

import os
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from sandbox.backend import WorkspaceQuota

# "inprocess" runs tools in the gateway's own threads: no isolation, for measuring overhead.
SandboxChoice = Literal["auto", "docker", "bwrap", "process", "inprocess"]


class SandboxConfig(BaseModel):
    # Unknown CONCLAVE_SANDBOX_* variables are ignored, as every unknown CONCLAVE_* one is.
    model_config = ConfigDict(frozen=True, extra="ignore")

    backend: SandboxChoice = "auto"
    image: str = "conclave-runtime:latest"
    # With several Docker engines (CONCLAVE_DOCKER_HOSTS), the sandboxes this gateway may
    # hold on each (unset: pool_max).
    engine_capacity: int | None = Field(default=None, gt=0)
    pool_max: int = Field(default=32, gt=0)
    # The Docker engine's calls (create, start, inspect, remove) run in a pool of this many
    # threads per engine, off the event loop: a burst of starts and teardowns waits its turn
    # there instead of taking the threads the gateway's other blocking work shares.
    engine_threads: int = Field(default=8, gt=0)
    # Fair shares of that cap, counting the sandboxes in use (busy or starting): a tenant may
    # hold at most `tenant_max` (unset: half the cap, so one tenant's flood always leaves the
    # other half to everyone else) and an agent at most `agent_max` (unset: a quarter, so one
    # agent cannot take all of its tenant's half).
    tenant_max: int | None = Field(default=None, gt=0)
    agent_max: int | None = Field(default=None, gt=0)
    # Of those, how many one tenant may have starting at once (0: no cap but its share): a
    # cold start's CPU (the engine's, the runtime's, the runner's imports) is in no tenant's
    # CPU share, so a tenant cycling calls through many agents must not spend it freely.
    tenant_starts_max: int = Field(default=0, ge=0)
    # And how fast, once it began its share's worth back to back: a tenant whose agents
    # outnumber its share turns every call into a cold start (each evicts another agent's
    # idle sandbox), ~0.25 CPU-seconds of the engine's and the runner's each, which no CPU
    # share bounds; at 1 a second that is a quarter of a core. 0: no bound.
    tenant_start_rate_per_s: float = Field(default=1.0, ge=0)
    # A call that cannot have a sandbox waits up to this long (never past its deadline) in a
    # queue served round robin by tenant, then gets SANDBOX_UNAVAILABLE: long enough for a
    # warm call or two to finish, short enough that a refused agent backs off soon. At most
    # `queue_max` calls of one tenant wait; the next is refused at once. 0: refused at once.
    queue_ms: int = Field(default=1000, ge=0)
    queue_max: int = Field(default=32, gt=0)
    idle_s: float = Field(default=300.0, gt=0)
    recycle_after: int = Field(default=500, gt=0)
    # Keep one pre-started spare sandbox for the tenant of the last cold start, in its cgroup,
    # until a new agent of that tenant takes it, for the profiles of calls limited to these
    # memory_mb (rounded up to their tier, so [256] covers every call of up to 256 MB).
    # Unset: the profile of the last cold start; [] none. A spare counts against pool_max and
    # is the first torn down for room.
    spares: tuple[int, ...] | None = None
    # Each sandbox's workspace is a file system of its own of this size and file count, so
    # tool code that fills it fails its own call (SANDBOX_DISK_FULL) and no other tenant, nor
    # the disk the gateway and Redis use, loses a byte. Its pages count as the sandbox's
    # memory. 0: no quota (a plain directory on the host's disk). Needs a root gateway.
    workspace_mb: int = Field(default=256, ge=0)
    workspace_inodes: int = Field(default=16_384, gt=0)
    # The CPUs every sandbox runs on, a cpuset list ("1-3", "0,2"); unset: every CPU. Leaving
    # one out keeps a core no tool code runs on for the gateway, Redis and the Docker engine:
    # under one tenant's flood of sandboxes (its cold starts, its tools' CPU) another tenant's
    # call otherwise waits for a CPU at each hop through them. Set by each sandbox's cgroup
    # (cpuset), so tool code cannot widen it. Needs cgroups: docker, or bwrap and process as
    # root on cgroup v1.
    cpus: str | None = None

    @field_validator("cpus")
    @classmethod
    def _cpus_here(cls, cpus: str | None) -> str | None:
        return None if cpus is None else cpu_list(cpus)

    @model_validator(mode="after")
    def _cpus_need_sandboxes(self) -> SandboxConfig:
        if self.cpus is not None and self.backend == "inprocess":
            raise ValueError("sandbox cpus: the inprocess backend runs tools in the gateway")
        return self

    @property
    def workspace_quota(self) -> WorkspaceQuota | None:
        """Each sandbox's workspace quota; None when the operator turned it off (0 MiB)."""
        if self.workspace_mb <= 0:
            return None
        return WorkspaceQuota(self.workspace_mb, self.workspace_inodes)


def cpu_list(text: str) -> str:
    """`text`, a cpuset list of CPUs this process may run on, in its canonical form ("0-2,5");
    ValueError when it is malformed, empty or names a CPU not here."""
    cpus: set[int] = set()
    try:
        for part in text.replace(" ", "").split(","):
            first, _, last = part.partition("-")
            cpus.update(range(int(first), int(last or first) + 1))
    except ValueError:
        cpus = set()
    if not cpus:
        raise ValueError(f"sandbox cpus {text!r}: not a CPU list such as '1-3' or '0,2'")
    here = os.sched_getaffinity(0)
    if not cpus <= here:
        raise ValueError(f"sandbox cpus {text!r}: this machine's CPUs are {_ranges(sorted(here))}")
    return _ranges(sorted(cpus))


def _ranges(cpus: list[int]) -> str:
    runs: list[list[int]] = []
    for cpu in cpus:
        if runs and cpu == runs[-1][1] + 1:
            runs[-1][1] = cpu
        else:
            runs.append([cpu, cpu])
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)


# A pool built directly (tests, the bench) refuses at once and keeps no spares unless asked.
DIRECT_POOL = SandboxConfig(queue_ms=0, spares=(), workspace_mb=0, tenant_start_rate_per_s=0)

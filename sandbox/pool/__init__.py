"""The warm pool and its admission: which call gets which sandbox, when, and at whose expense.

| module | holds |
|---|---|
| `warm_pool` | `SandboxPool`, the executor the gateway dispatches to: checkout, checkin, reaping |
| `profiles` | a call's limits as a sandbox's profile (`profile_for`), the pool's keys |
| `fair_share` | the caps: the pool's, each tenant's and agent's share, a tenant's starts |
| `fair_queue` | calls waiting for a sandbox, served round robin by tenant |
| `arrivals` | sandboxes on their way to an identity's idle pool (after a cancel, a late start) |
| `spares` | pre-started sandboxes of a tenant, for agents it has not seen yet |
| `idle_sandboxes` | the idle sandboxes, and which goes first when one must |
| `sandbox_uids` | each live sandbox's own host uid, from the range Conclave owns |
"""

from sandbox.pool.fair_share import PoolFullError
from sandbox.pool.profiles import profile_for
from sandbox.pool.warm_pool import SandboxPool

__all__ = ["PoolFullError", "SandboxPool", "profile_for"]

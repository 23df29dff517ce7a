"""What travels with a delegation, from agent to agent through the gateway: the signed chain
of agents and delegators (`X-Conclave-Chain`), and what it lets the agent at its end do for
the agents before it (the confused deputy: no more than each of them may hand on). Read by
the authorize stage on every request that carries one; written there for each A2A request.
A hosted task's end cancels what runs under it on every replica (`TaskCascade`). The agent
gets the caller's share of its deadline (`onward_deadline_ms`), not the whole of it."""

from gateway.delegation.delegation_chain import (
    DELEGATE,
    NO_CHAIN,
    ChainSigner,
    DelegationChain,
    Delegator,
    delegable,
)
from gateway.delegation.onward_deadline import onward_deadline_ms
from gateway.delegation.task_cascade import TASK_END_CHANNEL, TaskCascade

__all__ = [
    "DELEGATE",
    "NO_CHAIN",
    "TASK_END_CHANNEL",
    "ChainSigner",
    "DelegationChain",
    "Delegator",
    "TaskCascade",
    "delegable",
    "onward_deadline_ms",
]

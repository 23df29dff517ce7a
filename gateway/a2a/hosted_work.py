"""The workers' side of a hosted agent: claiming the next task (a bounded long poll) and a
fenced update, each refused unless the caller is the agent itself (the agent `name` of the
declared tenant: AGENT_NOT_ALLOWED for anyone else)."""

from __future__ import annotations

import math
import time

import anyio

from gateway.a2a.hosted_agents import HostedAgent
from gateway.a2a.hosted_tasks import HostedTasks
from gateway.gateway_error import GatewayError
from protocol import A2aWorkAck, A2aWorkItem, A2aWorkUpdate, ErrorCode, Principal

MAX_WAIT_S = 20.0  # a long poll answers 204 after this, at the latest
_POLL_S = (0.02, 0.05, 0.1, 0.2)  # the queue is looked at again after these, then every last


def check_worker(agent: HostedAgent | None, name: str, principal: Principal) -> HostedAgent:
    if agent is None:
        raise GatewayError.of(
            ErrorCode.NOT_FOUND,
            f"no hosted A2A agent {name!r} is served here: declare [[a2a_agent]] name ="
            f" {name!r} with a tenant and no url",
        )
    if not agent.served_by(principal):
        raise GatewayError.of(
            ErrorCode.AGENT_NOT_ALLOWED,
            f"{principal.tenant}/{principal.agent} may not serve A2A agent {name!r}: only the"
            f" agent {agent.tenant}/{agent.name} does (its workers use its token)",
        )
    return agent


async def next_work(tasks: HostedTasks, agent: HostedAgent, wait_s: float) -> A2aWorkItem | None:
    """The next task of `agent`, leased to the caller, waiting up to `wait_s` for one."""
    ends = time.monotonic() + min(max(wait_s, 0.0), MAX_WAIT_S)
    polls = 0
    while True:
        item = await tasks.claim(agent.name, agent.lease_ms)
        left = ends - time.monotonic()
        if item is not None or left <= 0:
            return item
        await anyio.sleep(min(left, _POLL_S[min(polls, len(_POLL_S) - 1)]))
        polls += 1


def task_token_ttl_s(agent: HostedAgent, item: A2aWorkItem, worker: Principal, max_s: int) -> int:
    """How long the task token given with `item` lives: until the caller's deadline (else
    the agent's `timeout_s`), never past the worker's own token nor `max_s`; at least 1 s."""
    now = time.time()
    ends = item.deadline_ms / 1000 if item.deadline_ms is not None else now + agent.config.timeout_s
    if worker.expires_at:
        ends = min(ends, worker.expires_at)
    return max(1, min(max_s, math.ceil(ends - now)))


async def post_update(
    tasks: HostedTasks, agent: HostedAgent, task_id: str, update: A2aWorkUpdate
) -> A2aWorkAck:
    """The worker's update, fenced by its token (FENCED once its lease moved on)."""
    outcome = await tasks.write(
        agent.name,
        task_id,
        update.token,
        agent.lease_ms,
        update.state,
        update.message,
        update.artifact,
        as_message=update.as_message,
        append=update.append,
        last_chunk=update.last_chunk,
    )
    if outcome.verdict == "OK":
        return A2aWorkAck(lease_expires_ms=outcome.lease_expires_ms)
    if outcome.verdict == "CANCELED":
        return A2aWorkAck(cancelled=True)
    if outcome.verdict == "GONE":
        raise GatewayError.of(
            ErrorCode.NOT_FOUND, f"A2A agent {agent.name!r} has no task {task_id[:64]!r}"
        )
    raise GatewayError.of(
        ErrorCode.FENCED,
        f"task {task_id[:64]!r} of A2A agent {agent.name!r} is no longer yours: your lease"
        f" (token {update.token}) ended or the task did; drop this work and claim the next",
        details={"task_id": task_id, "token": update.token},
    )

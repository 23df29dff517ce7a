"""The admin API's policy rules in Redis, put in force on every replica within a second.

One JSON document of rules and a version beside it (one hash tag: one slot on a cluster).
`replace` compiles the new rules first (PolicyError: nothing is stored, the old rules stay in
force) and then stores them and moves the version on in one transaction; `follow` (run in the
gateway's background group) reads the version every `POLL_S` and, when it moved, reads the
rules and swaps them into this replica's `Policies`. A document that no longer compiles here
(written by a newer gateway) is logged and the rules in force are kept.
"""

from __future__ import annotations

import logging

import anyio
from anyio.abc import TaskStatus
from pydantic import ValidationError
from redis.asyncio import Redis
from redis.exceptions import RedisError

from gateway.policy.compiled_rule import PolicyError, compile_rules
from gateway.policy.policy_rules import Policies
from protocol import PolicySet

log = logging.getLogger("conclave.gateway.policy")

POLL_S = 0.5  # a change reaches every replica within this (and a read)
_RULES = "conclave:{policies}:rules"
_VERSION = "conclave:{policies}:version"


class PolicyStore:
    def __init__(self, redis: Redis, policies: Policies) -> None:
        self.redis = redis
        self.policies = policies

    async def rules(self) -> tuple[PolicySet, int]:
        """The admin API's rules as stored, and their version."""
        raw, version = await self.redis.mget(_RULES, _VERSION)
        rules = PolicySet.model_validate_json(raw) if raw else PolicySet()
        return rules, int(version or 0)

    async def replace(self, rules: PolicySet) -> int:
        """Store `rules` in place of the API's, once they compile; the new version."""
        compiled = compile_rules(rules.rules)
        async with self.redis.pipeline(transaction=True) as tx:
            tx.set(_RULES, rules.model_dump_json())
            tx.incr(_VERSION)
            _, version = await tx.execute()
        self.policies.swap_api(compiled, int(version))  # this replica at once
        return int(version)

    async def refresh(self) -> None:
        """Put the stored rules in force here if their version moved."""
        version = int(await self.redis.get(_VERSION) or 0)
        if version == self.policies.version:
            return
        try:
            rules, version = await self.rules()
            self.policies.swap_api(compile_rules(rules.rules), version)
        except (PolicyError, ValidationError) as exc:
            log.error("policy rules version %s not put in force: %s", version, exc)
            self.policies.version = version  # not read again until it moves on

    async def follow(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Refresh now and every `POLL_S`; a Redis that is away keeps the rules in force (a
        gateway starts without one, answering STATE_UNAVAILABLE where it is needed)."""
        started = False
        while True:
            try:
                await self.refresh()
            except (RedisError, OSError) as exc:
                log.warning("policy rules not refreshed: %s", exc)
            if not started:
                task_status.started()
                started = True
            await anyio.sleep(POLL_S)

"""Governance: policy rules over a call's arguments, caller and time, compiled once
(`compiled_rule`), found once per tenant, agent and tool and asked together
(`matching_rules`), decided in the authorize stage (`policy_rules`); the admin API's rules
kept in Redis and followed by every replica (`policy_store`)."""

from gateway.policy.compiled_rule import (
    CompiledRule,
    PolicyError,
    any_glob,
    compile_rules,
)
from gateway.policy.policy_rules import Policies
from gateway.policy.policy_store import PolicyStore

__all__ = [
    "CompiledRule",
    "Policies",
    "PolicyError",
    "PolicyStore",
    "any_glob",
    "compile_rules",
]

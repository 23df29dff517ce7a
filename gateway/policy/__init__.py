"""Governance: policy rules over a call's arguments, caller and time, decided in the authorize
stage (`policy_rules`), the admin API's rules kept in Redis and followed by every replica
(`policy_store`)."""

from gateway.policy.policy_rules import (
    CompiledRule,
    Policies,
    PolicyError,
    any_glob,
    compile_rules,
)
from gateway.policy.policy_store import PolicyStore

__all__ = [
    "CompiledRule",
    "Policies",
    "PolicyError",
    "PolicyStore",
    "any_glob",
    "compile_rules",
]

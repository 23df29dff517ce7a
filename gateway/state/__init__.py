"""Shared state in Redis with write ownership: namespaces, reads, leases, commits, history."""

from gateway.state.checker import Anomaly, CheckReport, check_history, check_namespace_history
from gateway.state.history import read_all_history, read_history
from gateway.state.key_list import KeyListing
from gateway.state.keys import Actor, NamespaceKeys, check_key, check_namespace, check_session
from gateway.state.refusals import namespace_not_found, task_over_quota
from gateway.state.store import StateStore

__all__ = [
    "Actor",
    "Anomaly",
    "CheckReport",
    "KeyListing",
    "NamespaceKeys",
    "StateStore",
    "check_history",
    "check_key",
    "check_namespace",
    "check_namespace_history",
    "check_session",
    "namespace_not_found",
    "read_all_history",
    "read_history",
    "task_over_quota",
]

"""Shared state in Redis with write ownership: namespaces, reads, leases, commits, history."""

from gateway.state.checker import Anomaly, CheckReport, check_history, check_namespace_history
from gateway.state.history import read_all_history, read_history
from gateway.state.keys import Actor, NamespaceKeys, check_key, check_namespace
from gateway.state.store import StateStore

__all__ = [
    "Actor",
    "Anomaly",
    "CheckReport",
    "NamespaceKeys",
    "StateStore",
    "check_history",
    "check_key",
    "check_namespace",
    "check_namespace_history",
    "read_all_history",
    "read_history",
]

"""Egress: the gateway-run proxy through which sandboxed tools reach allow-listed hosts."""

from gateway.egress.destination_rule import EgressRefused, checked_addresses, public_addresses
from gateway.egress.proxy import EgressLimits, EgressProxy

__all__ = [
    "EgressLimits",
    "EgressProxy",
    "EgressRefused",
    "checked_addresses",
    "public_addresses",
]

"""Approvals (issue 42): a call an `approve` policy rule holds until a person decides.

`HeldCalls` holds a call on the replica it came to and releases it when an approval settles
on any replica; `ApprovalBook` keeps the held calls in Redis and decides who may approve;
`canonical_arguments` is what an approval is bound to (docs/governance.md).
"""

from gateway.approvals.approval_book import CHANNEL, ApprovalBook, Decision, identity_of
from gateway.approvals.canonical_arguments import arguments_digest, canonical_json
from gateway.approvals.held_calls import HeldCall, HeldCalls

__all__ = [
    "CHANNEL",
    "ApprovalBook",
    "Decision",
    "HeldCall",
    "HeldCalls",
    "arguments_digest",
    "canonical_json",
    "identity_of",
]

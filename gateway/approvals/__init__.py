"""Approvals (issue 42): a call an `approve` policy rule holds until a person decides.

`HeldCalls` holds a call on the replica it came to and releases it when an approval settles
on any replica; `ApprovalBook` keeps the held calls in Redis and decides who may approve;
`canonical_arguments` is what an approval is bound to; `ApprovalWebhook` tells an operator's
URL of each call held, signed (docs/governance.md).
"""

from gateway.approvals.approval_book import CHANNEL, ApprovalBook, Decision, identity_of
from gateway.approvals.approval_webhook import (
    ApprovalWebhook,
    WebhookRefused,
    sign,
    verify_signature,
)
from gateway.approvals.canonical_arguments import arguments_digest, canonical_json
from gateway.approvals.held_calls import HeldCall, HeldCalls

__all__ = [
    "CHANNEL",
    "ApprovalBook",
    "ApprovalWebhook",
    "Decision",
    "HeldCall",
    "HeldCalls",
    "WebhookRefused",
    "arguments_digest",
    "canonical_json",
    "identity_of",
    "sign",
    "verify_signature",
]

"""A2A 1.0's method names (its specification's method mapping): what the gateway forwards,
audits and counts; a fixed set, so they are safe as metric labels."""

from __future__ import annotations

A2A_VERSION = "1.0"
# The A2A agents a request went through before it (signed by the gateway), and how many may be
# on a chain: one deeper, or one returning to an agent already on it, is DELEGATION_LOOP.
CHAIN_HEADER = "X-Conclave-Chain"
A2A_MAX_CHAIN = 8
A2A_VERSION_HEADER = "A2A-Version"
A2A_METHODS = (
    "SendMessage",
    "SendStreamingMessage",
    "GetTask",
    "ListTasks",
    "CancelTask",
    "SubscribeToTask",
    "CreateTaskPushNotificationConfig",
    "GetTaskPushNotificationConfig",
    "ListTaskPushNotificationConfigs",
    "DeleteTaskPushNotificationConfig",
    "GetExtendedAgentCard",
)
A2A_STREAMING = frozenset({"SendStreamingMessage", "SubscribeToTask"})  # answered as SSE

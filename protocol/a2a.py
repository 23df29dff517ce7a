"""A2A 1.0's method names (its specification's method mapping): what the gateway forwards,
audits and counts; a fixed set, so they are safe as metric labels."""

from __future__ import annotations

A2A_VERSION = "1.0"
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

"""What an A2A 1.0 request asks, whichever binding carried it: the method, the task it names,
and whether it is answered as a stream.

JSON-RPC names the method in the body; HTTP+JSON in the verb and path (`REST_ROUTES`, the
specification's method mapping, each with and without the `/{tenant}` prefix). A request the
gateway cannot place in either is refused before anything is forwarded: the task a request
names is what the gateway checks its caller owns, so it must know where to find it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from protocol import A2A_STREAMING

PUSH_METHODS = frozenset(
    {
        "CreateTaskPushNotificationConfig",
        "GetTaskPushNotificationConfig",
        "ListTaskPushNotificationConfigs",
        "DeleteTaskPushNotificationConfig",
    }
)
# The methods whose task id is `params.taskId` (push configs), else `params.id`.
_TASK_ID_FIELD = {
    "GetTask": "id",
    "CancelTask": "id",
    "SubscribeToTask": "id",
    "CreateTaskPushNotificationConfig": "taskId",
    "GetTaskPushNotificationConfig": "taskId",
    "ListTaskPushNotificationConfigs": "taskId",
    "DeleteTaskPushNotificationConfig": "taskId",
}

_SEGMENT = r"[^/]+"
_ID = r"[^/:]+"  # a task id: a path segment short of a custom verb (":cancel")
_TENANT = rf"(?:/(?P<tenant>{_SEGMENT}))?"
# (verb, path pattern under the agent's REST base, method); `task` names the task's segment
REST_ROUTES: tuple[tuple[str, re.Pattern[str], str], ...] = tuple(
    (verb, re.compile(rf"^{_TENANT}{path}$"), method)
    for verb, path, method in (
        ("POST", "/message:send", "SendMessage"),
        ("POST", "/message:stream", "SendStreamingMessage"),
        ("GET", rf"/tasks/(?P<task>{_ID}):subscribe", "SubscribeToTask"),
        ("POST", rf"/tasks/(?P<task>{_ID}):subscribe", "SubscribeToTask"),
        ("POST", rf"/tasks/(?P<task>{_ID}):cancel", "CancelTask"),
        ("GET", r"/tasks", "ListTasks"),
        ("GET", rf"/tasks/(?P<task>{_ID})", "GetTask"),
        (
            "POST",
            rf"/tasks/(?P<task>{_ID})/pushNotificationConfigs",
            "CreateTaskPushNotificationConfig",
        ),
        (
            "GET",
            rf"/tasks/(?P<task>{_ID})/pushNotificationConfigs",
            "ListTaskPushNotificationConfigs",
        ),
        (
            "GET",
            rf"/tasks/(?P<task>{_ID})/pushNotificationConfigs/{_SEGMENT}",
            "GetTaskPushNotificationConfig",
        ),
        (
            "DELETE",
            rf"/tasks/(?P<task>{_ID})/pushNotificationConfigs/{_SEGMENT}",
            "DeleteTaskPushNotificationConfig",
        ),
        ("GET", r"/extendedAgentCard", "GetExtendedAgentCard"),
    )
)


@dataclass(frozen=True)
class A2aRequest:
    method: str
    task_id: str | None = None  # the existing task the request names (None: none, or new)
    push_url: str | None = None  # where a push-notification config sends the agent

    @property
    def streams(self) -> bool:
        return self.method in A2A_STREAMING


def rpc_request(method: str, params: Any) -> A2aRequest:
    """The request a JSON-RPC `method` with `params` makes (the method is one of `A2A_METHODS`)."""
    params = params if isinstance(params, dict) else {}
    if method in ("SendMessage", "SendStreamingMessage"):
        message = params.get("message")
        task_id = message.get("taskId") if isinstance(message, dict) else None
    else:
        task_id = params.get(_TASK_ID_FIELD.get(method, ""))
    return A2aRequest(method, _text(task_id), _push_url(method, params))


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _push_url(method: str, body: Any) -> str | None:
    if method != "CreateTaskPushNotificationConfig" or not isinstance(body, dict):
        return None
    url = body.get("url")
    return url if isinstance(url, str) else ""  # "": named none, refused as not a URL


def rest_request(verb: str, path: str, body: Any) -> A2aRequest | None:
    """The request `verb path` (under the agent's REST base) makes, or None: no A2A route."""
    for route_verb, pattern, method in REST_ROUTES:
        if route_verb != verb or (found := pattern.match(path)) is None:
            continue
        task = found.groupdict().get("task")
        if task is None and method in ("SendMessage", "SendStreamingMessage"):
            return rpc_request(method, body)
        return A2aRequest(method, task, _push_url(method, body))
    return None


def task_id_of(result: Any) -> str | None:
    """The task an answer (a SendMessage result, a stream event, a Task) is about."""
    if not isinstance(result, dict):
        return None
    for field in ("task", "statusUpdate", "artifactUpdate", "message"):
        inner = result.get(field)
        if isinstance(inner, dict):
            found = inner.get("id" if field == "task" else "taskId")
            return found if isinstance(found, str) and found else None
    found = result.get("id") if "status" in result else result.get("taskId")
    return found if isinstance(found, str) and found else None

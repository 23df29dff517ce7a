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

from gateway.a2a.a2a_errors import (
    CONTENT_TYPE_NOT_SUPPORTED,
    VERSION_NOT_SUPPORTED,
    a2a_failure,
)
from gateway.gateway_error import GatewayError
from protocol import A2A_STREAMING, A2A_VERSION, ErrorCode

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

_CURL_DEFAULT = "application/x-www-form-urlencoded"  # what `curl -d` declares
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
    """The request a JSON-RPC `method` with `params` makes (the method is one of `A2A_METHODS`).
    INVALID_REQUEST when its params are not an object (a message not one either), or it names
    its task in a way the gateway cannot check."""
    if params is None:
        params = {}
    if not isinstance(params, dict):
        raise _invalid(f"{method}'s params (an HTTP+JSON body) must be a JSON object")
    if method in ("SendMessage", "SendStreamingMessage"):
        message = params.get("message")
        if not isinstance(message, dict):
            raise _invalid(f"{method} needs a message: an object with role, parts, messageId")
        task_id = _task_named(message, "taskId")
    else:
        task_id = _task_named(params, _TASK_ID_FIELD.get(method, ""))
    return A2aRequest(method, task_id, _push_url(method, params))


def check_version(version: str | None) -> None:
    """VersionNotSupportedError unless the caller's `A2A-Version` is the one the gateway
    serves (its Major.Minor: "1.0", "1.0.2"). A request without the header is taken as 1.0,
    though the specification reads it as 0.3: the gateway's cards declare 1.0 only, and a plain
    HTTP client that omits the header means the version the card it read declares."""
    if not version or version.strip() == A2A_VERSION:
        return
    if ".".join(version.strip().split(".")[:2]) != A2A_VERSION:
        raise a2a_failure(
            VERSION_NOT_SUPPORTED,
            ErrorCode.INVALID_REQUEST,
            f"A2A-Version {version[:16]!r} is not served here: send A2A-Version: {A2A_VERSION}",
        )


def check_rpc_content_type(content_type: str | None) -> None:
    """ContentTypeNotSupportedError for a JSON-RPC body its Content-Type says is something
    other than JSON. None, and curl's `-d` default (form-urlencoded), are read as JSON, as
    every gateway route reads them (`gateway.http.body`)."""
    media = (content_type or "").split(";")[0].strip().lower()
    if media in ("", "application/json", _CURL_DEFAULT) or media.endswith("+json"):
        return
    raise a2a_failure(
        CONTENT_TYPE_NOT_SUPPORTED,
        ErrorCode.INVALID_REQUEST,
        f"send a JSON-RPC request as Content-Type: application/json, not {media[:64]!r}",
    )


def _invalid(message: str) -> GatewayError:
    return GatewayError.of(ErrorCode.INVALID_REQUEST, message)


def _task_named(body: dict[str, Any], field: str) -> str | None:
    """The task id `body` names in `field`, in any spelling a server reads (ProtoJSON takes
    camelCase and the proto's snake_case alike): all of them must agree, and be a string, so
    the task the gateway checks is the task the agent acts on."""
    if not field:
        return None
    spellings = {field, re.sub(r"[A-Z]", lambda m: "_" + m.group().lower(), field)}
    named = [body[name] for name in spellings if name in body]
    if not named:
        return None
    if any(not isinstance(n, str) for n in named) or len(set(named)) > 1:
        raise _invalid(
            f"the request names its task ({' or '.join(sorted(spellings))}) more than once,"
            " differently, or not as a string"
        )
    return str(named[0]) or None


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
        if body is not None and not isinstance(body, dict):
            raise _invalid("an HTTP+JSON body must be a JSON object")
        named = _task_named(body, "taskId") if isinstance(body, dict) else None
        if named is not None and named != task:  # the body may name a task the path does not
            raise _invalid("the body names another task than the path: name one task")
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

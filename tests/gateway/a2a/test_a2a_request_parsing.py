"""Which task an A2A request names, whichever binding and spelling carries it: the gateway
checks that its caller owns that task, so a request must not name one task to the gateway and
another to the agent (ProtoJSON servers read `taskId` and `task_id` alike)."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.a2a import rest_request, rpc_request
from gateway.gateway_error import GatewayError
from protocol import ErrorCode


def _message(**fields: Any) -> dict[str, Any]:
    return {"message": {"messageId": "m", "role": "ROLE_USER", "parts": [], **fields}}


@pytest.mark.parametrize("spelling", ["taskId", "task_id"])
def test_a_message_names_its_task_in_either_spelling(spelling: str) -> None:
    assert rpc_request("SendMessage", _message(**{spelling: "t1"})).task_id == "t1"
    assert rest_request("POST", "/message:send", _message(**{spelling: "t1"})) == rpc_request(
        "SendMessage", _message(taskId="t1")
    )
    push = {spelling: "t2", "url": "https://example.com/hook"}
    assert rpc_request("CreateTaskPushNotificationConfig", push).task_id == "t2"


@pytest.mark.parametrize(
    "fields",
    [{"taskId": "mine", "task_id": "theirs"}, {"taskId": 7}, {"task_id": ["theirs"]}],
)
def test_a_task_named_twice_differently_or_not_as_text_is_refused(fields: dict[str, Any]) -> None:
    with pytest.raises(GatewayError) as refused:
        rpc_request("SendMessage", _message(**fields))
    assert refused.value.error.code is ErrorCode.INVALID_REQUEST
    with pytest.raises(GatewayError):
        rpc_request("GetTaskPushNotificationConfig", {**fields, "id": "c1"})


def test_a_rest_body_may_not_name_another_task_than_its_path() -> None:
    with pytest.raises(GatewayError) as refused:
        rest_request("POST", "/tasks/mine/pushNotificationConfigs", {"taskId": "theirs"})
    assert refused.value.error.code is ErrorCode.INVALID_REQUEST
    same = rest_request("POST", "/tasks/mine/pushNotificationConfigs", {"task_id": "mine"})
    assert same is not None and same.task_id == "mine"


@pytest.mark.parametrize(
    ("verb", "path", "method", "task"),
    [
        ("GET", "/tasks/t1", "GetTask", "t1"),
        ("GET", "/acme/tasks/t1", "GetTask", "t1"),
        ("POST", "/tasks/t1:cancel", "CancelTask", "t1"),
        ("POST", "/tasks/t1:subscribe", "SubscribeToTask", "t1"),
        ("GET", "/tasks/t1:subscribe", "SubscribeToTask", "t1"),
        ("GET", "/tasks", "ListTasks", None),
        ("GET", "/tasks/t1/pushNotificationConfigs/c1", "GetTaskPushNotificationConfig", "t1"),
        (
            "DELETE",
            "/tasks/t1/pushNotificationConfigs/c1",
            "DeleteTaskPushNotificationConfig",
            "t1",
        ),
        ("GET", "/extendedAgentCard", "GetExtendedAgentCard", None),
    ],
)
def test_every_rest_route_names_its_method_and_task(
    verb: str, path: str, method: str, task: str | None
) -> None:
    request = rest_request(verb, path, None)
    assert request is not None and (request.method, request.task_id) == (method, task)


def test_a_path_that_is_no_a2a_route_is_none() -> None:
    assert rest_request("GET", "/tasks/t1/elsewhere", None) is None
    assert rest_request("PUT", "/tasks/t1", None) is None

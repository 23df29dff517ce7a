"""ListTasks for a hosted agent: the caller's own tasks, newest first, filtered and paged as
A2A 1.0's `ListTasksRequest` says.

- `contextId` keeps the tasks of one conversation, `status` those in one state
  (`TASK_STATE_WORKING`, ...); `totalSize` counts what matched, before paging.
- `pageSize` (1-100, 50 when not given) tasks a page; `nextPageToken` is the last task of the
  page (empty on the last page), and a `pageToken` names where the next page starts: one this
  agent did not give (or whose task has expired since) is INVALID_ARGUMENTS.
- `historyLength` trims each task's history to its last n messages; artifacts are left out
  unless `includeArtifacts` is true, as the specification's default keeps a listing small.

Each field is read in its JSON name (camelCase) or its proto name (snake_case), as ProtoJSON
takes either, and from an HTTP+JSON query string as text.
"""

from __future__ import annotations

from typing import Any

from gateway.a2a.hosted_tasks import HostedTasks
from gateway.gateway_error import GatewayError
from protocol import ErrorCode, Principal

PAGE_DEFAULT = 50
PAGE_MAX = 100
TASK_STATES = frozenset(
    {
        "TASK_STATE_SUBMITTED",
        "TASK_STATE_WORKING",
        "TASK_STATE_COMPLETED",
        "TASK_STATE_FAILED",
        "TASK_STATE_CANCELED",
        "TASK_STATE_INPUT_REQUIRED",
        "TASK_STATE_REJECTED",
        "TASK_STATE_AUTH_REQUIRED",
    }
)


async def list_tasks(
    tasks: HostedTasks, agent: str, principal: Principal, params: dict[str, Any]
) -> dict[str, Any]:
    """The ListTasksResponse for `params` (a ListTasksRequest) of `principal`'s tasks."""
    context = _text(params, "contextId", "context_id")
    state = _text(params, "status", "status")
    if state is not None and state not in TASK_STATES:
        raise _invalid("status", f"a task state, one of {', '.join(sorted(TASK_STATES))}")
    size = _number(params, "pageSize", "page_size")
    size = PAGE_DEFAULT if size is None else min(max(size, 1), PAGE_MAX)
    history = _number(params, "historyLength", "history_length")
    artifacts = _field(params, "includeArtifacts", "include_artifacts") in (True, "true")
    ids = await tasks.owned(agent, principal, context=context, state=state)
    start = 0
    token = _text(params, "pageToken", "page_token")
    if token is not None:
        if token not in ids:
            raise _invalid("pageToken", "a nextPageToken this agent answered, still current")
        start = ids.index(token) + 1
    page: list[dict[str, Any]] = []
    for task_id in ids[start : start + size]:
        task = await tasks.task(agent, task_id, principal, history)
        if task is not None:
            if not artifacts:
                task.pop("artifacts", None)
            page.append(task)
    more = start + size < len(ids)
    return {
        "tasks": page,
        "nextPageToken": ids[start + size - 1] if more else "",
        "pageSize": size,
        "totalSize": len(ids),
    }


def _field(params: dict[str, Any], json_name: str, proto_name: str) -> Any:
    return params.get(json_name, params.get(proto_name))


def _text(params: dict[str, Any], json_name: str, proto_name: str) -> str | None:
    value = _field(params, json_name, proto_name)
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise _invalid(json_name, "a string")
    return value


def _number(params: dict[str, Any], json_name: str, proto_name: str) -> int | None:
    value = _field(params, json_name, proto_name)
    if value is None or value == "":
        return None
    try:
        return int(value)
    except (TypeError, ValueError):
        raise _invalid(json_name, "a whole number") from None


def _invalid(field: str, wanted: str) -> GatewayError:
    return GatewayError.of(
        ErrorCode.INVALID_ARGUMENTS,
        f"ListTasks' {field} must be {wanted}",
        param_hints={field: wanted},
    )

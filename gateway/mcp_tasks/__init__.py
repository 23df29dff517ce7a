"""MCP tasks (the extension `io.modelcontextprotocol/tasks`): a tool call run apart from the
request that asked for it, its record in Redis (`TaskStore`) so that any replica answers for
it, run by the replica that accepted it (`TaskRunner`) and taken over by another when that
replica dies."""

from gateway.mcp_tasks.task_record import (
    TASK_ID_PATTERN,
    TERMINAL,
    TaskCall,
    TaskRecord,
    TaskStatus,
    new_task_id,
)
from gateway.mcp_tasks.task_runner import (
    TASK_REQUEST_PREFIX,
    OutcomeOf,
    TaskOutcome,
    TaskRunner,
    task_request_id,
)
from gateway.mcp_tasks.task_store import TaskStore, task_key

__all__ = [
    "TASK_ID_PATTERN",
    "TASK_REQUEST_PREFIX",
    "TERMINAL",
    "OutcomeOf",
    "TaskCall",
    "TaskOutcome",
    "TaskRecord",
    "TaskRunner",
    "TaskStatus",
    "TaskStore",
    "new_task_id",
    "task_key",
    "task_request_id",
]

"""`conclave bench tasks`: external task sets (AgentDojo, HumanEval) and the shared-ledger
task, run by a model or a team of agents through gateway, sandbox and store."""

from conclave.bench.tasks.task_models import TaskOptions

__all__ = [
    "TaskOptions",
]

"""AgentDojo through Conclave: each task's tools called via the gateway, run in the sandbox.

Per task: its environment is committed to the store (`<suite>/<task>` in a run namespace);
an agent (the oracle by default: a `ScriptedModel` replaying the task's ground-truth calls,
then its ground-truth answer) works on the task's prompt through `run_loop`. Each function
the model calls goes: read the environment from the store, call tool `<suite>.<function>`
through the gateway with it (the sandbox runs AgentDojo's function), commit the changed
environment back with the version read. At the end the task's own utility check runs on
the environment before and after and on the calls made, exactly as AgentDojo scores an agent.

The package's own ground-truth utility (AgentDojo's `GroundTruthPipeline`, run in-process on
the same tasks) is the reference the oracle must reach. Any `ChatModel` can replace the
oracle (`model_for`), e.g. `OpenAICompatible(...)`.
"""

from __future__ import annotations

import statistics
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from agentdojo.agent_pipeline.ground_truth_pipeline import GroundTruthPipeline
from agentdojo.base_tasks import BaseUserTask
from agentdojo.functions_runtime import FunctionCall
from agentdojo.task_suite.load_suites import get_suites
from agentdojo.task_suite.task_suite import TaskSuite

from agents import (
    ChatModel,
    GatewayClient,
    LocalTool,
    LoopBudget,
    ScriptedCall,
    ScriptedModel,
    run_loop,
)
from protocol import AgentRegistration, CommitRequest, NamespaceConfig, Write
from tools.harness.agentdojo_suites import BENCHMARK_VERSION, restore, tool_name

ModelFor = Callable[[str, BaseUserTask[Any], Any], ChatModel]  # (suite, task, pre env) -> model


@dataclass
class SuiteScore:
    suite: str
    tasks: int = 0
    utility: int = 0  # tasks solved through Conclave
    reference: int = 0  # tasks AgentDojo's own ground-truth pipeline solves
    calls: int = 0
    tool_call_ms: list[float] = field(default_factory=list)  # gateway round trip per call
    tool_own_ms: list[float] = field(default_factory=list)  # the function's time in the sandbox
    store_ms: list[float] = field(default_factory=list)  # environment read + commit per call
    failed: list[str] = field(default_factory=list)
    cold_start_ms: float | None = None  # the first call, which also started the sandbox

    @property
    def overhead_ms(self) -> list[float]:
        """Platform time per call: the round trip minus the function's own time, plus store."""
        return [
            trip - own + store
            for trip, own, store in zip(
                self.tool_call_ms, self.tool_own_ms, self.store_ms, strict=True
            )
        ]

    def median_overhead_ms(self) -> float:
        return statistics.median(self.overhead_ms) if self.overhead_ms else 0.0


def oracle(suite: str, task: BaseUserTask[Any], pre: Any) -> ChatModel:
    """Replays the task's ground-truth calls, then answers its ground-truth output."""
    steps: list[Any] = [
        [ScriptedCall(call.function, dict(call.args))] for call in task.ground_truth(pre)
    ]
    return ScriptedModel([*steps, task.GROUND_TRUTH_OUTPUT])


class _EnvironmentTools:
    """The suite's functions as tools for the model, each a gateway call on the stored env."""

    def __init__(self, client: GatewayClient, namespace: str, key: str, score: SuiteScore):
        self.client, self.namespace, self.key, self.score = client, namespace, key, score

    def tools(self, suite: TaskSuite[Any], suite_name: str) -> list[LocalTool]:
        return [self._tool(suite_name, f.name, f.description, f.parameters) for f in suite.tools]

    def _tool(self, suite: str, name: str, description: str, parameters: Any) -> LocalTool:
        schema = parameters.model_json_schema()
        schema.pop("title", None)
        definition = {
            "type": "function",
            "function": {"name": name, "description": description, "parameters": schema},
        }

        async def handler(arguments: dict[str, Any]) -> Any:
            started = time.perf_counter()
            read = await self.client.read(self.namespace, self.key)
            store_s = time.perf_counter() - started
            call_started = time.perf_counter()
            result = await self.client.call_tool(
                tool_name(suite, name), {**arguments, "environment": read.value}
            )
            trip_s = time.perf_counter() - call_started
            payload = result.result
            commit_started = time.perf_counter()
            write = Write(key=self.key, value=payload["environment"], expected_version=read.version)
            await self.client.commit(
                self.namespace,
                CommitRequest(writes=[write], read_set={self.key: read.version}),
            )
            store_s += time.perf_counter() - commit_started
            self.score.calls += 1
            if self.score.cold_start_ms is None:
                # The suite agent's first call starts its sandbox (the runner imports
                # agentdojo, seconds): reported apart, not as per-call overhead.
                self.score.cold_start_ms = trip_s * 1000
                return payload["error"] if payload["error"] else payload["result"]
            self.score.tool_call_ms.append(trip_s * 1000)
            self.score.tool_own_ms.append(result.usage.wall_ms)
            self.score.store_ms.append(store_s * 1000)
            return payload["error"] if payload["error"] else payload["result"]

        return LocalTool(definition, handler)


def reference_utility(suite: TaskSuite[Any], task: BaseUserTask[Any]) -> bool:
    utility, _ = suite.run_task_with_pipeline(GroundTruthPipeline(task), task, None, {})
    return bool(utility)


async def run_task(
    client: GatewayClient,
    namespace: str,
    suite_name: str,
    suite: TaskSuite[Any],
    task: BaseUserTask[Any],
    score: SuiteScore,
    model_for: ModelFor,
) -> bool:
    environment = task.init_environment(suite.load_and_inject_default_environment({}))
    data = environment.model_dump(mode="json")
    pre = restore(suite.environment_type, data)
    key = f"{suite_name}/{task.ID}"
    await client.commit(namespace, CommitRequest(writes=[Write(key=key, value=data)]))
    tools = _EnvironmentTools(client, namespace, key, score).tools(suite, suite_name)
    model = model_for(suite_name, task, restore(suite.environment_type, data))
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a helpful assistant with tools."},
        {"role": "user", "content": task.PROMPT},
    ]
    budget = LoopBudget(max_turns=len(task.ground_truth(pre)) + 8)
    run = await run_loop(model, client, messages, [], budget, tools)
    final = await client.read(namespace, key)
    post = restore(suite.environment_type, final.value)
    traces = [FunctionCall(function=c.tool, args=c.arguments) for c in run.calls]
    output = run.answer or ""
    solved = task.utility_from_traces(output, pre, post, traces)
    if solved is None:
        solved = task.utility(output, pre, post)
    return bool(solved)


async def run_agentdojo(
    admin: GatewayClient,
    *,
    suites: list[str] | None = None,
    tasks_per_suite: int | None = None,
    model_for: ModelFor = oracle,
    on_task: Callable[[], None] | None = None,
) -> list[SuiteScore]:
    """Run AgentDojo user tasks through the gateway; one agent identity per suite."""
    namespace = f"agentdojo-{uuid.uuid4().hex[:8]}"
    available = get_suites(BENCHMARK_VERSION)
    scores: list[SuiteScore] = []
    for suite_name in suites or list(available):
        suite = available[suite_name]
        registration = AgentRegistration(
            tenant="bench",
            agent=f"agentdojo-{suite_name}",
            tools=[f"{suite_name}.*"],
            namespaces={namespace: "write"},
        )
        token = await admin.register_agent(registration)
        score = SuiteScore(suite_name)
        async with admin.for_token(token.token) as client:
            await client.create_namespace(namespace, NamespaceConfig())
            for task in list(suite.user_tasks.values())[:tasks_per_suite]:
                score.tasks += 1
                solved = await run_task(
                    client, namespace, suite_name, suite, task, score, model_for
                )
                score.utility += solved
                score.reference += reference_utility(suite, task)
                if not solved:
                    score.failed.append(task.ID)
                if on_task is not None:
                    on_task()
        scores.append(score)
    return scores


def task_count(suites: list[str] | None, tasks_per_suite: int | None) -> int:
    available = get_suites(BENCHMARK_VERSION)
    return sum(
        len(list(available[name].user_tasks)[:tasks_per_suite]) for name in suites or available
    )

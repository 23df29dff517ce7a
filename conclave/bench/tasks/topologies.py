"""What every team topology of `conclave bench tasks` shares: one budget per task, the
metered model, the scripted noisy oracle, and the scripted team members.

Budget: one deadline and one token budget per task, for the whole team (`TeamBudget`).
Every member's model is wrapped in `Metered`, which refuses a turn once the team has spent
its tokens or passed its deadline (`BudgetExhausted`: the task fails and its log says why).
Tokens are what the model reports (prompt + completion); a model that reports none (the
scripted ones, the local GGUF) is counted by the word rule of `word_tokens`: the
whitespace-separated words of every message's content and tool-call arguments sent, plus
those of the reply.

`scripted:noisy:<p>` behaves like the oracle but makes each step that carries arguments
wrong with probability p, from a seed (`StepNoise`): one argument of the call changed (a
string gets "-wrong" appended, a number 1 added, ...). It counts the steps it spoiled, so
"errors propagated" is measurable without a real model.

Scripted members say what they do in plain lines the others can read: a plan is one line
per worker of `call NAME {json}` items (`plan_lines`), a worker makes the calls its prompt
lists (`ScriptedRole`), a peer claims each step in the shared namespace before making it
(`ClaimingPeer`).
"""

from __future__ import annotations

import json
import random
import re
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from agents import ChatModel, ChatReply, ScriptedCall, ToolCall
from agents.models import Message, ToolDefinition
from conclave.bench.tasks.task_models import NOISY

TEAM_SIZE = 3  # agents of an independent, centralized (workers) or decentralized team
TASK_TOKENS = 60_000  # per task, for the whole team, whatever its topology
TASK_SECONDS = 120.0  # per task, for the whole team
_CALL = re.compile(r"call (\w+) (\{.*?\})(?= ; |$)", re.MULTILINE)


class BudgetExhausted(RuntimeError):
    """The team spent its task's tokens or passed its deadline: the task fails."""


@dataclass
class MemberUsage:
    """What one member of a team spent on one task."""

    tokens: int = 0
    tool_calls: int = 0
    tool_errors: int = 0
    wrong_steps: int = 0  # steps scripted:noisy spoiled on purpose


@dataclass
class TeamBudget:
    """One task's budget, shared by every member of the team."""

    tokens: int = TASK_TOKENS
    seconds: float = TASK_SECONDS
    spent: int = 0
    started: float = field(default_factory=time.monotonic)
    exhausted: str | None = None  # why the team was stopped
    members: dict[str, MemberUsage] = field(default_factory=dict)

    def member(self, name: str) -> MemberUsage:
        return self.members.setdefault(name, MemberUsage())

    def remaining_s(self) -> float:
        return max(0.0, self.seconds - (time.monotonic() - self.started))

    def check(self) -> None:
        """BudgetExhausted once the tokens are spent or the deadline passed."""
        if self.spent >= self.tokens:
            self.exhausted = f"token budget exhausted: the team spent {self.spent} of {self.tokens}"
        elif self.remaining_s() <= 0:
            self.exhausted = f"deadline passed: the team's {self.seconds:g} s are over"
        if self.exhausted is not None:
            raise BudgetExhausted(self.exhausted)

    def summary(self, topology: str) -> dict[str, Any]:
        """What the per-task log says about the team."""
        return {
            "topology": topology,
            "tokens": self.spent,
            "token_budget": self.tokens,
            "budget_exhausted": self.exhausted,
            "agents": {name: vars(usage) for name, usage in self.members.items()},
        }


def _words(value: Any) -> int:
    return len(str(value or "").split())


def word_tokens(messages: list[Message], reply: ChatReply) -> int:
    """The word rule: words of every message's content and tool-call arguments, plus the
    reply's content and calls (name and arguments)."""
    sent = 0
    for message in messages:
        sent += _words(message.get("content"))
        for call in message.get("tool_calls") or []:
            sent += _words(call["function"]["arguments"])
    answered = _words(reply.content)
    answered += sum(1 + _words(json.dumps(c.arguments)) for c in reply.tool_calls)
    return sent + answered


class Metered:
    """A member's model, charged to the team's budget; refuses turns once it is spent."""

    def __init__(self, model: ChatModel, budget: TeamBudget, member: str):
        self.model, self.budget, self.member = model, budget, member

    @property
    def name(self) -> str:
        return self.model.name

    async def complete(
        self, messages: list[Message], tools: list[ToolDefinition] | None = None
    ) -> ChatReply:
        self.budget.check()
        reply = await self.model.complete(messages, tools)
        used = reply.prompt_tokens + reply.completion_tokens or word_tokens(messages, reply)
        self.budget.spent += used
        self.budget.member(self.member).tokens += used
        return reply


def noise_probability(spec: str) -> float | None:
    """p of `scripted:noisy:<p>` (checked by `check_model_spec`); None for other models."""
    return float(spec.removeprefix(NOISY)) if spec.startswith(NOISY) else None


def _spoil(value: Any) -> Any:
    if isinstance(value, bool):
        return not value
    if isinstance(value, int | float):
        return value + 1
    if isinstance(value, str):
        return f"{value}-wrong"
    return type(value)() if isinstance(value, list | dict) else "wrong"


class StepNoise:
    """Spoils a step with arguments with probability `p`, drawn from `seed`."""

    def __init__(self, p: float, seed: str):
        self.p, self._draw = p, random.Random(seed)
        self.wrong = 0

    def step(self, call: ScriptedCall) -> ScriptedCall:
        if self.p <= 0 or not call.arguments or self._draw.random() >= self.p:
            return call
        self.wrong += 1
        name = next(iter(call.arguments))
        return ScriptedCall(call.name, {**call.arguments, name: _spoil(call.arguments[name])})

    def text(self, right: str, wrong: str) -> str:
        """An answer that is itself the step (HumanEval's completion)."""
        if self.p > 0 and self._draw.random() < self.p:
            self.wrong += 1
            return wrong
        return right


def call_line(calls: Sequence[ScriptedCall]) -> str:
    return " ; ".join(f"call {c.name} {json.dumps(c.arguments, sort_keys=True)}" for c in calls)


def read_calls(text: str) -> list[ScriptedCall]:
    """The `call NAME {json}` items of `text`, in order."""
    return [ScriptedCall(name, json.loads(args)) for name, args in _CALL.findall(text)]


def plan_lines(calls: Sequence[ScriptedCall], workers: int) -> str:
    """A plan: `workers` lines, the calls dealt round robin (a line with none: nothing)."""
    lines = [call_line(calls[index::workers]) or "nothing to do" for index in range(workers)]
    return "\n".join(lines)


def majority(answers: Sequence[str]) -> int:
    """The index of the answer most members gave (the first of them on a tie)."""
    counts = Counter(answers)
    best = max(counts.values(), default=0)
    return next(i for i, answer in enumerate(answers) if counts[answer] == best)


class _Scripted:
    def __init__(self, noise: StepNoise):
        self.noise = noise
        self._ids = 0

    @property
    def name(self) -> str:
        return "scripted"

    def _call(self, call: ScriptedCall) -> ChatReply:
        self._ids += 1
        made = self.noise.step(call)
        return ChatReply(tool_calls=(ToolCall(f"call_{self._ids}", made.name, made.arguments),))


class ScriptedRole(_Scripted):
    """A scripted member. On each new prompt: answers `opening` if it has one left (a
    planner's plan), else makes, one per turn, the `calls` it was given or those its prompt
    lists (minus those the prompt reports `done`: a planner checking its workers), then
    answers `answer`."""

    def __init__(
        self,
        answer: str,
        noise: StepNoise,
        *,
        calls: Sequence[ScriptedCall] | None = None,
        opening: str | None = None,
        planned: Sequence[ScriptedCall] = (),
    ):
        super().__init__(noise)
        self._answer, self._calls, self._opening = answer, calls, opening
        self._planned = list(planned)
        self._queue: list[ScriptedCall] = []

    async def complete(
        self, messages: list[Message], tools: list[ToolDefinition] | None = None
    ) -> ChatReply:
        if messages[-1]["role"] == "user":
            prompt = str(messages[-1]["content"])
            if self._opening is not None:
                opening, self._opening = self._opening, None
                return ChatReply(content=opening)
            if self._planned:  # checking: redo each planned call no worker did as planned
                lines = prompt.splitlines()
                done = {line.removeprefix("done ") for line in lines if line.startswith("done ")}
                self._queue = [c for c in self._planned if call_line([c]) not in done]
            else:
                self._queue = list(self._calls) if self._calls is not None else read_calls(prompt)
            self._calls = None
        if self._queue:
            return self._call(self._queue.pop(0))
        return ChatReply(content=self._answer)


class ClaimingPeer(_Scripted):
    """A scripted peer on shared state: for each step of the task it first claims the key
    `step-<n>` with `shared_update` (version 0: only one peer's claim can commit), and makes
    the step only when its claim committed; then answers `answer`."""

    def __init__(self, calls: Sequence[ScriptedCall], answer: str, noise: StepNoise, me: str):
        super().__init__(noise)
        self._steps, self._answer, self._me = list(calls), answer, me
        self._next = 0
        self._claimed = False

    async def complete(
        self, messages: list[Message], tools: list[ToolDefinition] | None = None
    ) -> ChatReply:
        if self._claimed:  # the last tool result answers our claim of step `_next`
            self._claimed = False
            step, self._next = self._steps[self._next], self._next + 1
            if json.loads(str(messages[-1]["content"])).get("committed"):
                return self._call(step)
        if self._next < len(self._steps):
            self._claimed = True
            self._ids += 1
            claim = {"key": f"step-{self._next}", "value": self._me, "version": 0}
            return ChatReply(tool_calls=(ToolCall(f"claim_{self._ids}", "shared_update", claim),))
        return ChatReply(content=self._answer)

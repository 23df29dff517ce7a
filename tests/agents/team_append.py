"""Two `decentralized` peers each add their name to one shared list, in racing seeded runs.

Issue 16's goal: both names kept in 100 of 100 runs. Each run is a fresh two-peer team
(`alice`, `bob`; new identities and a new namespace) on the given gateway, driven by
scripted models, and counts as kept when the list ends holding both names:

- ``update``: each peer `shared_read`s the list, then `shared_update`s it with its name
  appended, passing the version it read. Both reads happen before either write, and the
  seed picks who writes first, so the second writer always works from a stale version: it
  must get the conflict back and redo its update from the value the tool returns.
- ``append``: both peers `shared_append` their name at once, neither waiting for the other
  (the commutative op).
"""

from __future__ import annotations

import json
import random
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import anyio

from agents import (
    Agent,
    ChatReply,
    GatewayClient,
    ScriptedCall,
    ScriptedModel,
    decentralized,
)
from agents.models import Message, ToolDefinition

Variant = Literal["update", "append"]
KEY = "names"
PEERS = ("alice", "bob")
_MAX_STEPS = 12


@dataclass(frozen=True)
class TeamAppendResult:
    """Runs keeping both names, out of runs, per variant."""

    update: tuple[int, int]
    append: tuple[int, int]


@dataclass
class _Race:
    """Both peers' reads happen before either writes; `first` writes before the other."""

    first: str
    ready: dict[str, anyio.Event]
    first_wrote: anyio.Event


def _last_tool_result(messages: list[Message]) -> dict[str, Any]:
    result: dict[str, Any] = json.loads(
        next(m for m in reversed(messages) if m["role"] == "tool")["content"]
    )
    return result


def _follow(name: str, variant: Variant) -> Any:
    """A model step: answer once committed; else (re)do the write from what the tool said."""

    def step(messages: list[Message]) -> str | Sequence[ScriptedCall]:
        seen = _last_tool_result(messages)
        if seen.get("committed"):
            return "done"
        if variant == "append":
            return [ScriptedCall("shared_append", {"key": KEY, "item": name})]
        names = list(seen.get("value") or [])
        arguments = {"key": KEY, "value": [*names, name], "version": seen.get("version", 0)}
        return [ScriptedCall("shared_update", arguments)]

    return step


class _RacingPeer:
    """A scripted model whose first write waits for the race's order (see `_Race`)."""

    def __init__(self, peer: str, variant: Variant, race: _Race) -> None:
        first: list[ScriptedCall] = (
            [ScriptedCall("shared_read", {"key": KEY})]
            if variant == "update"
            else [ScriptedCall("shared_append", {"key": KEY, "item": peer})]
        )
        steps: list[Any] = [first] + [_follow(peer, variant)] * _MAX_STEPS
        self._script = ScriptedModel(steps)
        self._peer, self._variant, self._race = peer, variant, race

    @property
    def name(self) -> str:
        return "scripted"

    async def complete(
        self, messages: list[Message], tools: list[ToolDefinition] | None = None
    ) -> ChatReply:
        writing_turn = 1 if self._variant == "update" else 0
        turn = self._script.turns
        if turn == writing_turn:
            self._race.ready[self._peer].set()
            for ready in self._race.ready.values():
                await ready.wait()
            if self._variant == "update" and self._peer != self._race.first:
                await self._race.first_wrote.wait()
        elif turn == writing_turn + 1 and self._peer == self._race.first:
            self._race.first_wrote.set()
        return await self._script.complete(messages, tools)


@dataclass(frozen=True)
class TeamAppendRun:
    names: list[Any]  # the shared list as the run ends
    redone: int  # writes the peers had to redo after a conflict


async def team_append_run(admin: GatewayClient, variant: Variant, seed: int) -> TeamAppendRun:
    """One seeded two-peer run of `variant`."""
    run_id = uuid.uuid4().hex[:12]
    race = _Race(
        first=random.Random(seed).choice(PEERS),
        ready={peer: anyio.Event() for peer in PEERS},
        first_wrote=anyio.Event(),
    )
    peers = [
        Agent(f"{peer}-{run_id}", "Add your name to the list.", _RacingPeer(peer, variant, race))
        for peer in PEERS
    ]
    namespace = f"team-append-{run_id}"
    team = decentralized(peers, namespace)
    await team.register(admin)
    try:
        final = await team.run(f"add your name to the list at {KEY!r}")
        client = peers[0].client
        assert client is not None
        stored = await client.read(namespace, KEY)
    finally:
        await team.aclose()
    calls = sum(answer["tool_calls"] for answer in final["answers"])
    first_calls = 2 if variant == "update" else 1  # per peer, when nothing conflicts
    return TeamAppendRun(list(stored.value or []), calls - first_calls * len(PEERS))


async def team_append_runs(
    admin: GatewayClient, runs: int = 100, seed: int = 0
) -> TeamAppendResult:
    """`runs` seeded runs of each variant: (runs keeping both names, runs) for each."""
    kept: dict[Variant, int] = {"update": 0, "append": 0}
    for variant in ("update", "append"):
        for index in range(runs):
            run = await team_append_run(admin, variant, seed + index)
            kept[variant] += sorted(run.names) == sorted(PEERS)
    return TeamAppendResult((kept["update"], runs), (kept["append"], runs))

"""The hosted A2A agents (`[[a2a_agent]]` without a url): served at `/a2a/{name}` like the
remote ones, their tasks run by workers that pull them (`gateway.a2a.hosted_serving`).

A hosted agent has no card of its own to read: the gateway writes it from the declaration
(its description as its one skill), with the gateway's interfaces and bearer scheme as
`gateway_card` gives a remote agent's, streaming on and push notifications off.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from typing import Any

from gateway.a2a.agent_card import gateway_card
from gateway.a2a.remote_agents import HTTP_JSON, JSONRPC
from protocol import A2A_VERSION, Principal
from tools.sources import A2aAgentConfig


class HostedAgent:
    def __init__(self, config: A2aAgentConfig) -> None:
        assert config.tenant is not None  # HostedAgents holds the hosted ones only
        self.config = config
        self.name = config.name
        self.tenant = config.tenant
        self.lease_ms = int(config.lease_s * 1000)
        self.card_read_at = time.time()  # its card changes only with the configuration

    def served_by(self, principal: Principal) -> bool:
        """Whether `principal` may serve the agent: the agent `name` of its tenant."""
        return principal.tenant == self.tenant and principal.agent == self.name

    def card(self, origin: str) -> dict[str, Any]:
        """The agent's card as the gateway at `origin` serves it."""
        description = self.config.description or f"The Conclave agent {self.name!r}"
        declared = {
            "name": self.name,
            "description": description,
            "version": "1.0.0",
            "supportedInterfaces": [
                {"protocolBinding": JSONRPC, "protocolVersion": A2A_VERSION},
                {"protocolBinding": HTTP_JSON, "protocolVersion": A2A_VERSION},
            ],
            "capabilities": {"streaming": True, "pushNotifications": False},
            "defaultInputModes": ["text/plain"],
            "defaultOutputModes": ["text/plain"],
            "skills": [
                {
                    "id": self.name,
                    "name": self.name,
                    "description": description,
                    "tags": ["conclave"],  # required (A2A 1.0): one says who serves it
                }
            ],
        }
        return gateway_card(declared, origin, self.name)


class HostedAgents:
    """Every declared hosted agent, by name."""

    def __init__(self, configs: Sequence[A2aAgentConfig]) -> None:
        self._agents = {c.name: HostedAgent(c) for c in configs if c.hosted}

    def get(self, name: str) -> HostedAgent | None:
        return self._agents.get(name)

    @property
    def names(self) -> frozenset[str]:
        return frozenset(self._agents)

    @property
    def confined(self) -> frozenset[str]:
        """ "tenant/name" of the agents declared `confined` (they act by task tokens only)."""
        return frozenset(f"{a.tenant}/{a.name}" for a in self._agents.values() if a.config.confined)

    def __iter__(self) -> Iterator[HostedAgent]:
        return iter(self._agents.values())

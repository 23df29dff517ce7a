"""The remote A2A agents the gateway serves (`[[a2a_agent]]` in conclave.toml): each with its
own HTTP client, the gateway's credential for it, and its card.

An agent's card is read from `{url}/.well-known/agent-card.json` when first needed and again
every `CARD_TTL_S`; the interfaces it declares (JSON-RPC, HTTP+JSON) say where requests go. An
interface on another origin than the configured URL is not followed: the operator named one
host, and a card (the agent's own text) must not send the gateway elsewhere. An agent declared
with a `card_key_file` must sign its card with that key (JWS, `card_signature`): a card no
signature of it verifies is refused as the agent answering garbage, and nothing is forwarded.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from typing import Any
from urllib.parse import urlsplit

import httpx

from gateway.a2a.a2a_errors import INVALID_AGENT_RESPONSE, UNSUPPORTED_OPERATION, a2a_failure
from gateway.a2a.card_signature import load_public_key, verified
from gateway.gateway_error import GatewayError
from gateway.sources.shared import Http1Pool, credential_headers
from protocol import ErrorCode
from tools.sources import A2aAgentConfig

CARD_PATH = "/.well-known/agent-card.json"
CARD_TTL_S = 60.0
MAX_CARD_BYTES = 256 * 1024
JSONRPC, HTTP_JSON = "JSONRPC", "HTTP+JSON"


def _origin(url: str) -> tuple[str, str, int | None]:
    parts = urlsplit(url)
    return parts.scheme, (parts.hostname or "").lower(), parts.port


def unavailable(name: str, why: str) -> GatewayError:
    return GatewayError.of(
        ErrorCode.UPSTREAM_UNAVAILABLE, f"A2A agent {name!r} cannot be reached: {why}"
    )


def garbage(name: str, why: str) -> GatewayError:
    return a2a_failure(
        INVALID_AGENT_RESPONSE, ErrorCode.TOOL_FAILED, f"A2A agent {name!r} answered garbage: {why}"
    )


class RemoteAgent:
    def __init__(self, config: A2aAgentConfig) -> None:
        self.config = config
        self.name = config.name
        assert config.url is not None  # RemoteAgents holds the remote ones only
        self.url = str(config.url).rstrip("/")
        credential = credential_headers(config)
        # Requests answered at once go over the pool (~0.7 ms of CPU less than httpx a
        # request); streams over httpx, which reads an event stream as it comes.
        self.pool = Http1Pool(self.url, credential, connect_timeout_s=10.0)
        self.http = httpx.AsyncClient(
            headers=credential,
            timeout=httpx.Timeout(config.timeout_s, connect=10.0),
            limits=httpx.Limits(max_connections=256, max_keepalive_connections=64),
            follow_redirects=False,
            trust_env=False,  # never an HTTP(S)_PROXY of the gateway's environment
        )
        self._card_key = load_public_key(config.card_key_file) if config.card_key_file else None
        self._card: dict[str, Any] | None = None
        self._card_read = 0.0
        self.card_read_at = 0.0  # unix time the card was last read (its Last-Modified)

    async def card(self) -> dict[str, Any]:
        """The agent's own card, as it last published it (read at most every CARD_TTL_S)."""
        if self._card is not None and time.monotonic() - self._card_read < CARD_TTL_S:
            return self._card
        try:
            answer = await self.http.get(self.url + CARD_PATH, timeout=10.0)
        except httpx.HTTPError as exc:
            raise unavailable(self.name, f"its card: {type(exc).__name__}") from exc
        if answer.status_code != 200:
            raise unavailable(self.name, f"its card answered HTTP {answer.status_code}")
        if len(answer.content) > MAX_CARD_BYTES:
            raise garbage(self.name, f"its card is over {MAX_CARD_BYTES} bytes")
        try:
            card = answer.json()
        except ValueError as exc:
            raise garbage(self.name, "its card is not JSON") from exc
        if not isinstance(card, dict) or not isinstance(card.get("supportedInterfaces"), list):
            raise garbage(self.name, "its card declares no supportedInterfaces")
        if self._card_key is not None and not verified(card, self._card_key):
            raise garbage(
                self.name,
                f"its card carries no signature of the key in {self.config.card_key_file}"
                " (card_key_file): have the agent sign it with that key, or declare its own",
            )
        if card != self._card:
            self.card_read_at = time.time()
        self._card, self._card_read = card, time.monotonic()
        return card

    async def sends_pushes(self) -> bool:
        """Whether its card declares push notifications."""
        capabilities = (await self.card()).get("capabilities")
        return isinstance(capabilities, dict) and capabilities.get("pushNotifications") is True

    async def interface(self, binding: str) -> str:
        """The agent's URL for `binding` (JSONRPC, HTTP+JSON), on the configured origin."""
        for declared in (await self.card())["supportedInterfaces"]:
            if not isinstance(declared, dict) or declared.get("protocolBinding") != binding:
                continue
            url = declared.get("url")
            if not isinstance(url, str) or _origin(url) != _origin(self.url):
                raise garbage(self.name, f"its {binding} interface is not on {self.url}")
            return url.rstrip("/")
        raise a2a_failure(
            UNSUPPORTED_OPERATION,
            ErrorCode.METHOD_NOT_FOUND,
            f"A2A agent {self.name!r} does not serve the {binding} binding: use another"
            " interface its card declares",
        )

    async def aclose(self) -> None:
        await self.pool.aclose()
        await self.http.aclose()


class RemoteAgents:
    """Every declared remote agent (one with a `url`), by name."""

    def __init__(self, configs: Sequence[A2aAgentConfig]) -> None:
        self._agents = {c.name: RemoteAgent(c) for c in configs if not c.hosted}

    def get(self, name: str) -> RemoteAgent | None:
        return self._agents.get(name)

    @property
    def names(self) -> frozenset[str]:
        return frozenset(self._agents)

    def __contains__(self, name: object) -> bool:
        return name in self._agents

    def __iter__(self) -> Iterator[RemoteAgent]:
        return iter(self._agents.values())

    async def aclose(self) -> None:
        for agent in self._agents.values():
            await agent.aclose()

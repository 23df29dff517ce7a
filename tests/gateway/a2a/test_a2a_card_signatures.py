"""Signed agent cards (A2A 1.0 section 8.4), with the reference SDK on the other side: a
remote agent signs its card with the SDK's signer, and the gateway, told the agent's public key
(`card_key_file`), serves the card and forwards to the agent only when that key signed it;
with a key of its own (`a2a_card_key`) the gateway signs the cards it serves, remote and
hosted, and the SDK's verifier accepts them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from a2a.types import AgentCard
from a2a.utils.signing import InvalidSignaturesError, create_signature_verifier
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from google.protobuf.json_format import ParseDict

from conclave.bench.a2a.echo_agent import running_agent
from gateway.config import Settings
from tests.helpers import admin_headers, in_process_gateway, registered_token

pytestmark = [pytest.mark.anyio, pytest.mark.system]  # the agent runs in its own process


def _key_pair(folder: Path, name: str) -> tuple[Path, bytes]:
    """A new EC P-256 key: its private PEM's file, and its public PEM."""
    key = ec.generate_private_key(ec.SECP256R1())
    private = folder / f"{name}.pem"
    private.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    public = key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    (folder / f"{name}.pub").write_bytes(public)
    return private, public


def _sdk_verifies(card: dict[str, Any], public: bytes) -> bool:
    verify = create_signature_verifier(lambda _kid, _jku: public, ["ES256"])
    try:
        verify(ParseDict(card, AgentCard()))
    except InvalidSignaturesError:
        return False
    return True


async def test_a_remote_card_is_served_only_signed_by_its_key_and_ours_are_signed(
    settings: Settings, tmp_path: Path
) -> None:
    agent_key, _ = _key_pair(tmp_path, "agent")
    _, other_public = _key_pair(tmp_path, "other")
    gateway_key, gateway_public = _key_pair(tmp_path, "gateway")
    with running_agent(card_key=agent_key) as url:
        config = tmp_path / "conclave.toml"
        config.write_text(
            f'[[a2a_agent]]\nname = "signed"\nurl = "{url}"\n'
            f'card_key_file = "{tmp_path / "agent.pub"}"\n\n'
            f'[[a2a_agent]]\nname = "forged"\nurl = "{url}"\n'
            f'card_key_file = "{tmp_path / "other.pub"}"\n\n'
            '[[a2a_agent]]\nname = "hosted"\ntenant = "acme"\n'
        )
        update = {"config": config, "sandbox_backend": "inprocess", "a2a_card_key": gateway_key}
        async with in_process_gateway(settings.model_copy(update=update)) as gateway:
            token = await registered_token(
                gateway, admin_headers(settings), "t1", "caller", agents=["signed", "forged"]
            )
            caller = {"Authorization": f"Bearer {token}", "A2A-Version": "1.0"}
            cards = {
                name: await gateway.get(f"/a2a/{name}/.well-known/agent-card.json")
                for name in ("signed", "forged", "hosted")
            }
            again = await gateway.get("/a2a/signed/.well-known/agent-card.json")
            send = {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "SendMessage",
                "params": {
                    "message": {"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "hi"}]}
                },
            }
            to_forged = await gateway.post("/a2a/forged", json=send, headers=caller)
            to_signed = await gateway.post("/a2a/signed", json=send, headers=caller)
    assert cards["signed"].status_code == 200 and cards["hosted"].status_code == 200
    signed, hosted = cards["signed"].json(), cards["hosted"].json()
    assert _sdk_verifies(signed, gateway_public) and _sdk_verifies(hosted, gateway_public)
    assert not _sdk_verifies(signed, other_public)
    assert again.headers["etag"] == cards["signed"].headers["etag"]  # one signature per card
    refused = cards["forged"].json()["error"]
    assert cards["forged"].status_code == 502 and "card_key_file" in refused["message"]
    assert to_forged.json()["error"]["code"] == -32006  # InvalidAgentResponseError
    assert "result" in to_signed.json(), to_signed.text

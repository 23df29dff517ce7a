"""Agent cards signed with JWS (A2A 1.0, section 8.4): the gateway verifies a remote agent's
card against the public key its declaration names (`card_key_file`), and signs the cards it
serves when it has a key of its own (`CONCLAVE_A2A_CARD_KEY`).

What is signed is the card without its `signatures`, empty strings, lists and objects removed
(as the reference SDK removes them: a card read into the protocol's types and written out again
loses them, so a signature must not cover them), in the JSON Canonicalization Scheme (RFC 8785:
keys sorted, no whitespace; a card holds strings, integers and booleans, which JSON writes
alike everywhere). A signature is a detached JWS: `protected` (its header, base64url) and
`signature`, over `protected + "." + base64url(payload)`.
"""

from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path
from typing import Any

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from jwt import api_jws

SigningKey = rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey | ed25519.Ed25519PrivateKey
# Asymmetric only: a card is verified by anyone, so a shared secret (HS*) would let every
# verifier sign; "none" signs nothing.
_SIGNATURES_KEPT = 256  # cards: one or two per declared agent
ACCEPTED = ["RS256", "RS384", "RS512", "ES256", "ES384", "ES512", "PS256", "EdDSA"]


class CardKeyError(ValueError):
    """A key file that holds no key the gateway can sign or verify cards with."""


def canonical_card(card: dict[str, Any]) -> bytes:
    """The bytes a signature of `card` covers."""
    content = _without_empty({k: v for k, v in card.items() if k != "signatures"}) or {}
    return json.dumps(content, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def _without_empty(value: Any) -> Any:
    if isinstance(value, dict):
        kept = {k: v for k, item in value.items() if (v := _without_empty(item)) is not None}
        return kept or None
    if isinstance(value, list):
        items = [v for item in value if (v := _without_empty(item)) is not None]
        return items or None
    return None if value == "" else value


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


class CardSigner:
    """Signs the cards the gateway serves with its private key (PEM: RSA, EC P-256 or
    Ed25519)."""

    def __init__(self, key_file: Path, key_id: str | None = None) -> None:
        try:
            key = serialization.load_pem_private_key(key_file.read_bytes(), password=None)
        except (OSError, ValueError, TypeError) as exc:
            raise CardKeyError(
                f"{key_file} holds no unencrypted PEM private key to sign agent cards with:"
                " write one with `openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256`"
            ) from exc
        if isinstance(key, rsa.RSAPrivateKey):
            self.algorithm = "RS256"
        elif isinstance(key, ec.EllipticCurvePrivateKey):
            self.algorithm = "ES256"
        elif isinstance(key, ed25519.Ed25519PrivateKey):
            self.algorithm = "EdDSA"
        else:
            raise CardKeyError(f"{key_file}: sign agent cards with an RSA, EC or Ed25519 key")
        self._key: SigningKey = key
        public = key.public_key().public_bytes(
            serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
        )
        self.key_id = key_id or hashlib.sha256(public).hexdigest()[:16]
        # A card's signature, by its content: a card changes with its agent's only, and an EC
        # signature differs at each signing, which would change the card's ETag each time.
        self._signatures: dict[bytes, dict[str, str]] = {}

    def signed(self, card: dict[str, Any]) -> dict[str, Any]:
        """`card` with the gateway's signature as its only one."""
        payload = canonical_card(card)
        signature = self._signatures.get(payload)
        if signature is None:
            header = {"alg": self.algorithm, "typ": "JOSE", "kid": self.key_id}
            compact = api_jws.encode(payload, self._key, algorithm=self.algorithm, headers=header)
            protected, _, signed = compact.split(".")
            signature = {"protected": protected, "signature": signed}
            if len(self._signatures) >= _SIGNATURES_KEPT:
                self._signatures.clear()
            self._signatures[payload] = signature
        return {**card, "signatures": [signature]}


def load_public_key(key_file: Path) -> Any:
    """The public key in `key_file` (PEM), that a remote agent's card must be signed by."""
    try:
        return serialization.load_pem_public_key(key_file.read_bytes())
    except (OSError, ValueError, TypeError) as exc:
        raise CardKeyError(
            f"{key_file} holds no PEM public key to verify the agent's card with: export the"
            " agent's with `openssl pkey -pubout`"
        ) from exc


def verified(card: dict[str, Any], public_key: Any) -> bool:
    """Whether one of `card`'s signatures is `public_key`'s over the card."""
    signatures = card.get("signatures")
    if not isinstance(signatures, list):
        return False
    payload = _b64(canonical_card(card))
    for entry in signatures:
        if not isinstance(entry, dict):
            continue
        protected, signature = entry.get("protected"), entry.get("signature")
        if not isinstance(protected, str) or not isinstance(signature, str):
            continue
        try:
            api_jws.decode_complete(
                f"{protected}.{payload}.{signature}", public_key, algorithms=ACCEPTED
            )
        except jwt.PyJWTError:
            continue
        return True
    return False

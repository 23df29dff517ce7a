"""An OAuth 2.1 authorization server for the OAuth tests, on a real loopback port.

What an MCP host meets at a real provider, kept small: RFC 8414 metadata, dynamic client
registration (RFC 7591), the authorization-code grant with PKCE (S256 only, checked with
authlib), RFC 8707 `resource` becoming the token's audience, RS256 tokens and their JWKS. The
user's consent is automatic. Tokens carry OAuth's space-separated `scope` and the user's
organisation in `org` (the gateway maps it to a tenant), as providers' tokens do. `grantable`
is what the user may grant: of it, what the client asked for (its globs matched) is granted.
"""

from __future__ import annotations

import json
import secrets
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import jwt
from authlib.oauth2.rfc7636 import create_s256_code_challenge
from cryptography.hazmat.primitives.asymmetric import rsa
from jwt.algorithms import RSAAlgorithm

KID = "as-1"


@dataclass
class AuthorizationServer:
    """The server's state: its key, registered clients, codes not yet exchanged, and what it
    issued (the tests read `issued` to see what a client asked for)."""

    grantable: set[str]
    organisation: str = "acme"
    key: Any = field(
        default_factory=lambda: rsa.generate_private_key(public_exponent=65537, key_size=2048)
    )
    issuer: str = ""
    clients: dict[str, dict[str, Any]] = field(default_factory=dict)
    codes: dict[str, dict[str, Any]] = field(default_factory=dict)
    issued: list[dict[str, Any]] = field(default_factory=list)

    def token(self, subject: str, scope: str, audience: str, ttl_s: int = 600) -> str:
        now = int(time.time())
        claims = {
            "iss": self.issuer,
            "sub": subject,
            "org": self.organisation,
            "scope": scope,
            "aud": audience,
            "iat": now,
            "exp": now + ttl_s,
        }
        self.issued.append(claims)
        return jwt.encode(claims, self.key, algorithm="RS256", headers={"kid": KID})

    def metadata(self) -> dict[str, Any]:
        return {
            "issuer": self.issuer,
            "authorization_endpoint": f"{self.issuer}/authorize",
            "token_endpoint": f"{self.issuer}/token",
            "registration_endpoint": f"{self.issuer}/register",
            "jwks_uri": f"{self.issuer}/jwks",
            "response_types_supported": ["code"],
            "grant_types_supported": ["authorization_code"],
            "code_challenge_methods_supported": ["S256"],
            "token_endpoint_auth_methods_supported": ["none"],
            "scopes_supported": sorted(self.grantable),
        }

    def jwks(self) -> dict[str, Any]:
        jwk = json.loads(RSAAlgorithm.to_jwk(self.key.public_key()))
        return {"keys": [{**jwk, "kid": KID, "alg": "RS256", "use": "sig"}]}

    def register(self, body: dict[str, Any]) -> dict[str, Any]:
        client_id = secrets.token_urlsafe(12)
        self.clients[client_id] = {
            **body,
            "client_id": client_id,
            "client_id_issued_at": int(time.time()),
            "token_endpoint_auth_method": "none",
        }
        return self.clients[client_id]

    def authorize(self, query: dict[str, str]) -> str:
        """The redirect back to the client (consent given), or ValueError."""
        client = self.clients.get(query.get("client_id", ""))
        if client is None or query.get("redirect_uri") not in client.get("redirect_uris", []):
            raise ValueError("unknown client or redirect_uri")
        if query.get("code_challenge_method") != "S256" or not query.get("code_challenge"):
            raise ValueError("PKCE S256 is required")
        code = secrets.token_urlsafe(16)
        asked = query.get("scope", "").split()
        granted = {g for g in self.grantable if any(fnmatchcase(g, a) for a in asked)}
        self.codes[code] = {**query, "scope": " ".join(sorted(granted))}
        back = {"code": code, "state": query.get("state", "")}
        return f"{query['redirect_uri']}?{urlencode(back)}"

    def exchange(self, form: dict[str, str]) -> dict[str, Any]:
        """A token for a code, or ValueError (a wrong verifier, client or redirect)."""
        grant = self.codes.pop(form.get("code", ""), None)
        if grant is None or form.get("client_id") != grant["client_id"]:
            raise ValueError("unknown code")
        if form.get("redirect_uri") != grant["redirect_uri"]:
            raise ValueError("redirect_uri differs")
        verifier = form.get("code_verifier", "")
        if create_s256_code_challenge(verifier) != grant["code_challenge"]:
            raise ValueError("PKCE verifier does not match")
        audience = form.get("resource") or grant.get("resource") or ""
        token = self.token(f"app-{grant['client_id'][:6].lower()}", grant["scope"], audience)
        return {
            "access_token": token,
            "token_type": "Bearer",
            "expires_in": 600,
            "scope": grant["scope"],
        }


@contextmanager
def serving(server: AuthorizationServer) -> Iterator[AuthorizationServer]:
    """`server` answering on a free loopback port (its `issuer` set) while in the block."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            url = urlsplit(self.path)
            query = {k: v[0] for k, v in parse_qs(url.query).items()}
            if url.path == "/.well-known/oauth-authorization-server":
                self._json(200, server.metadata())
            elif url.path == "/jwks":
                self._json(200, server.jwks())
            elif url.path == "/authorize":
                try:
                    location = server.authorize(query)
                except ValueError as exc:
                    self._json(400, {"error": "invalid_request", "error_description": str(exc)})
                    return
                self.send_response(302)
                self.send_header("Location", location)
                self.send_header("Content-Length", "0")
                self.end_headers()
            else:
                self._json(404, {"error": "not_found"})

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            raw = self.rfile.read(length).decode()
            if self.path == "/register":
                self._json(201, server.register(json.loads(raw)))
            elif self.path == "/token":
                form = {k: v[0] for k, v in parse_qs(raw).items()}
                try:
                    self._json(200, server.exchange(form))
                except ValueError as exc:
                    self._json(400, {"error": "invalid_grant", "error_description": str(exc)})
            else:
                self._json(404, {"error": "not_found"})

        def _json(self, status: int, body: dict[str, Any]) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: Any) -> None:
            pass

    http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.issuer = f"http://127.0.0.1:{http.server_address[1]}"
    thread = threading.Thread(target=http.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        http.shutdown()
        http.server_close()
        thread.join(timeout=5)

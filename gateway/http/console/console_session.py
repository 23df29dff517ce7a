"""Who may use the console: an admin session cookie, or the admin key in its header.

Logging in with the admin key sets `conclave_console`, an HttpOnly, SameSite=Strict cookie
holding a signed session (expiry and a random nonce, HMAC-SHA256 under a key derived from
the admin key: rotating the key ends every session). The key itself never travels in a URL
and never lands in the cookie. Every POST action also carries a form token, an HMAC of the
session's nonce, so a request another site forges (which SameSite already strips of the
cookie) cannot act even in a browser that ignores SameSite.

Logging out (a POST) ends the session on the server too: its nonce is kept in Redis as
ended until the session would have expired, so a copy of the cookie taken before the logout
no longer works (issue 26). Each cookie session costs one Redis read per console request.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from dataclasses import dataclass

from fastapi import Request
from redis.asyncio import Redis

from gateway.config import Settings, app_settings
from gateway.http.gateway_parts import gateway_parts
from protocol import ADMIN_KEY_HEADER

SESSION_COOKIE = "conclave_console"
SESSION_TTL_S = 8 * 3600
_ADMIN_KEY_NONCE = "admin-key"  # a request carrying the key itself: no session to end


def _ended_key(nonce: str) -> str:
    """Set while a logged-out session's cookie would still be valid."""
    return f"conclave:console:ended:{nonce}"


@dataclass(frozen=True)
class ConsoleSession:
    """A signed-in admin: the nonce the form token is derived from."""

    nonce: str
    expires_at: int

    def form_token(self, settings: Settings) -> str:
        return _sign(settings, f"form:{self.nonce}")


def _signing_key(settings: Settings) -> bytes:
    admin_key = settings.admin_key.get_secret_value().encode()
    return hmac.new(admin_key, b"conclave console session", hashlib.sha256).digest()


def _sign(settings: Settings, text: str) -> str:
    return hmac.new(_signing_key(settings), text.encode(), hashlib.sha256).hexdigest()


def admin_key_matches(settings: Settings, presented: str) -> bool:
    expected = settings.admin_key.get_secret_value()
    return bool(expected) and hmac.compare_digest(presented.encode(), expected.encode())


def new_session(settings: Settings) -> tuple[ConsoleSession, str]:
    """A fresh session and the cookie value that carries it."""
    session = ConsoleSession(secrets.token_hex(16), int(time.time()) + SESSION_TTL_S)
    payload = f"{session.expires_at}.{session.nonce}"
    return session, f"{payload}.{_sign(settings, payload)}"


async def session_of(request: Request) -> ConsoleSession | None:
    """The request's admin session: its valid cookie of a session not ended, or (for scripts
    and the bench) the admin key in its header; None when it has neither."""
    settings: Settings = app_settings(request.app)
    if admin_key_matches(settings, request.headers.get(ADMIN_KEY_HEADER, "")):
        return ConsoleSession(_ADMIN_KEY_NONCE, int(time.time()) + SESSION_TTL_S)
    expires, _, rest = request.cookies.get(SESSION_COOKIE, "").partition(".")
    nonce, _, signature = rest.partition(".")
    if not (expires.isdigit() and nonce and signature):
        return None
    if not hmac.compare_digest(signature, _sign(settings, f"{expires}.{nonce}")):
        return None
    if int(expires) < time.time():
        return None
    redis: Redis = gateway_parts(request.app).redis
    if await redis.exists(_ended_key(nonce)):
        return None
    return ConsoleSession(nonce, int(expires))


async def end_session(request: Request, session: ConsoleSession) -> None:
    """The session's cookie, and every copy of it, is refused from now on."""
    left_s = session.expires_at - int(time.time())
    if session.nonce == _ADMIN_KEY_NONCE or left_s <= 0:
        return
    redis: Redis = gateway_parts(request.app).redis
    await redis.set(_ended_key(session.nonce), 1, ex=left_s)


def form_token_matches(request: Request, session: ConsoleSession, presented: str) -> bool:
    settings: Settings = app_settings(request.app)
    return hmac.compare_digest(presented.encode(), session.form_token(settings).encode())

"""The security headers on every `/console` answer: pages, redirects, refusals, the stream.

An ASGI middleware, so no answer under `/console` leaves without them, whichever part wrote
it (a view, a redirect, a SERF refusal from the error handlers). The policy allows exactly
what the console uses: its one script by hash (`FEED_SCRIPT`), inline styles (the page's
style block and the chains' bar offsets), requests, forms and the event stream to this
origin; nothing may frame it (`frame-ancestors 'none'`, and `X-Frame-Options` for older
browsers), and no answer is sniffed as another type.
"""

from __future__ import annotations

import base64
import hashlib

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from gateway.http.console.feed_view import FEED_SCRIPT

CONSOLE_PREFIX = "/console"


def _script_hash(script: str) -> str:
    digest = hashlib.sha256(script.encode()).digest()
    return f"'sha256-{base64.b64encode(digest).decode()}'"


CONTENT_SECURITY_POLICY = "; ".join(
    (
        "default-src 'none'",
        f"script-src {_script_hash(FEED_SCRIPT)}",
        "style-src 'unsafe-inline'",
        "connect-src 'self'",
        "img-src 'self'",
        "form-action 'self'",
        "base-uri 'none'",
        "frame-ancestors 'none'",
    )
)
CONSOLE_HEADERS = (
    (b"content-security-policy", CONTENT_SECURITY_POLICY.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"no-referrer"),
)
_NAMES = {name for name, _ in CONSOLE_HEADERS}


class ConsoleHeaders:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path: str = scope.get("path", "")
        if scope["type"] != "http" or not (
            path == CONSOLE_PREFIX or path.startswith(CONSOLE_PREFIX + "/")
        ):
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                kept = [(k, v) for k, v in message.get("headers", []) if k.lower() not in _NAMES]
                message = {**message, "headers": [*kept, *CONSOLE_HEADERS]}
            await send(message)

        await self.app(scope, receive, send_with_headers)

"""The broker gateway: the one door every agent request goes through."""

from gateway.app import create_app
from gateway.auth import authenticated, issue_token, verify_token
from gateway.errors import GatewayError, translate
from gateway.settings import Settings

__all__ = [
    "GatewayError",
    "Settings",
    "authenticated",
    "create_app",
    "issue_token",
    "translate",
    "verify_token",
]

"""The broker gateway: the one door every agent request goes through.

Its public names are loaded on first use (PEP 562): `from gateway import default_data_dir`
imports the secrets store alone, not the app, Redis and the sandbox, so a `conclave` command
that only speaks HTTP starts in a fraction of a second.
"""

from __future__ import annotations

import typing as _typing

from protocol import lazy_exports as _lazy_exports

if _typing.TYPE_CHECKING:
    from gateway.assembly import ConfigurationError, create_app
    from gateway.config import ADMIN_KEY_FILE, Settings, default_data_dir
    from gateway.gateway_error import GatewayError, translate
    from gateway.identity import AgentDirectory, authenticated, issue_token, verify_token
    from gateway.redis_io import connect_redis
    from gateway.sources import (
        PythonSources,
        StdioSources,
        effective_backend,
        open_python_sources,
    )
    from gateway.telemetry import AuditLog, start_tracing, stop_tracing

_HOMES = {
    "ConfigurationError": "gateway.assembly",
    "create_app": "gateway.assembly",
    "AuditLog": "gateway.telemetry.audit",
    "GatewayError": "gateway.gateway_error",
    "translate": "gateway.gateway_error",
    "AgentDirectory": "gateway.identity",
    "authenticated": "gateway.identity",
    "issue_token": "gateway.identity",
    "verify_token": "gateway.identity",
    "connect_redis": "gateway.redis_io.redis_client",
    "ADMIN_KEY_FILE": "gateway.config.secrets_store",
    "default_data_dir": "gateway.config.secrets_store",
    "Settings": "gateway.config.settings",
    "PythonSources": "gateway.sources",
    "StdioSources": "gateway.sources",
    "effective_backend": "gateway.sources",
    "open_python_sources": "gateway.sources",
    "start_tracing": "gateway.telemetry.tracing",
    "stop_tracing": "gateway.telemetry.tracing",
}

__all__ = [
    "ADMIN_KEY_FILE",
    "AgentDirectory",
    "AuditLog",
    "ConfigurationError",
    "GatewayError",
    "PythonSources",
    "Settings",
    "StdioSources",
    "authenticated",
    "connect_redis",
    "create_app",
    "default_data_dir",
    "effective_backend",
    "issue_token",
    "open_python_sources",
    "start_tracing",
    "stop_tracing",
    "translate",
    "verify_token",
]

__getattr__, __dir__ = _lazy_exports(__name__, _HOMES)

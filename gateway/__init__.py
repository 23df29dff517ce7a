"""The broker gateway: the one door every agent request goes through."""

from gateway.assembly import ConfigurationError, create_app
from gateway.audit import AuditLog
from gateway.gateway_error import GatewayError, translate
from gateway.identity import AgentDirectory, authenticated, issue_token, verify_token
from gateway.redis_client import connect_redis
from gateway.secrets_store import ADMIN_KEY_FILE, default_data_dir
from gateway.settings import Settings
from gateway.sources import PythonSources, StdioSources, effective_backend, open_python_sources
from gateway.tracing import start_tracing, stop_tracing

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

"""The embedded stack: a real Redis, the gateway under uvicorn (one process or several behind
HAProxy) and the strongest sandbox, in one command; and the process plumbing under it (child
lifetimes, the settings pipe, ports, the private Docker engine, the config file).

Its names load on first use (PEP 562): the CLI imports this package for `is_loopback`
without paying for the stack, the gateway and Redis."""

from __future__ import annotations

import typing as _typing

from protocol import lazy_exports as _lazy_exports

if _typing.TYPE_CHECKING:
    from conclave.stack.balancer import write_haproxy
    from conclave.stack.config_file import settings_from
    from conclave.stack.embedded_redis import EmbeddedRedis
    from conclave.stack.embedded_stack import EmbeddedStack, StackError
    from conclave.stack.local_gateway import DEFAULT_GATEWAY
    from conclave.stack.loopback import is_loopback
    from conclave.stack.ports import free_port
    from conclave.stack.private_engine import EngineStartError, find_engine

_HOMES = {
    "DEFAULT_GATEWAY": "conclave.stack.local_gateway",
    "EmbeddedRedis": "conclave.stack.embedded_redis",
    "EmbeddedStack": "conclave.stack.embedded_stack",
    "EngineStartError": "conclave.stack.private_engine",
    "find_engine": "conclave.stack.private_engine",
    "free_port": "conclave.stack.ports",
    "is_loopback": "conclave.stack.loopback",
    "settings_from": "conclave.stack.config_file",
    "StackError": "conclave.stack.embedded_stack",
    "write_haproxy": "conclave.stack.balancer",
}

__all__ = [
    "DEFAULT_GATEWAY",
    "EmbeddedRedis",
    "EmbeddedStack",
    "EngineStartError",
    "StackError",
    "find_engine",
    "free_port",
    "is_loopback",
    "settings_from",
    "write_haproxy",
]

__getattr__, __dir__ = _lazy_exports(__name__, _HOMES)

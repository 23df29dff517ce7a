"""Composition root: the CLI, the embedded stack and the benchmark suites."""

from conclave.embedded_redis import EmbeddedRedis
from conclave.stack import EmbeddedStack

__all__ = ["EmbeddedRedis", "EmbeddedStack"]

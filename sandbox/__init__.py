"""Sandboxes that run tools: backends, the warm pool and the in-sandbox runner."""

from sandbox.executor import CallLimits, Invocation, Outcome, ToolExecutor

__all__ = ["CallLimits", "Invocation", "Outcome", "ToolExecutor"]

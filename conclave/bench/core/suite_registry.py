"""The suites `conclave bench` knows, in the order a full pass runs them.

Each entry names a module with `run(ctx: BenchContext) -> SuiteResult`; modules are imported
only when their suite runs, so one suite's heavy imports do not slow the others.
"""

from __future__ import annotations

import ast
import importlib.util

from conclave.bench.core.suite import Suite

SUITES: dict[str, str] = {
    "contention": "conclave.bench.contention.contention_suite",
    "budgets": "conclave.bench.recovery.budgets_suite",
    "errors": "conclave.bench.recovery.errors_suite",
    "tasks": "conclave.bench.tasks.tasks_suite",
    "sandbox": "conclave.bench.sandbox.sandbox_suite",
    "gateway": "conclave.bench.overhead.gateway_suite",
    "scale": "conclave.bench.overhead.scale_suite",
    "isolation": "conclave.bench.isolation.isolation_suite",
    "federation": "conclave.bench.mcp.federation_suite",
    "a2a": "conclave.bench.a2a.a2a_suite",
    "governance": "conclave.bench.governance.governance_suite",
    "conformance": "conclave.bench.mcp.conformance_suite",
    "tracing": "conclave.bench.overhead.tracing_suite",
    "console": "conclave.bench.overhead.console_suite",
    "chaos": "conclave.bench.chaos.chaos_suite",
}


def load_suite(name: str) -> Suite:
    if name not in SUITES:
        known = ", ".join(SUITES) or "none yet"
        raise KeyError(f"unknown suite {name!r}; known suites: {known}")
    module = importlib.import_module(SUITES[name])
    suite: Suite = module.run
    return suite


def suite_summary(name: str) -> str:
    """What a suite measures, for `conclave bench --help`: its module docstring's first line,
    after the "`conclave bench NAME`:" it starts with, read without importing the module."""
    spec = importlib.util.find_spec(SUITES[name])
    if spec is None or spec.origin is None:
        return ""
    with open(spec.origin, encoding="utf-8") as source:
        docstring = ast.get_docstring(ast.parse(source.read())) or ""
    first = docstring.splitlines()[0] if docstring else ""
    label, sep, rest = first.partition(": ")
    return rest if sep and name in label else first

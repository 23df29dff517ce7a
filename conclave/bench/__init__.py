"""`conclave bench`: benchmark suites that print figures against the issues' goals."""

from conclave.bench.registry import SUITES, load_suite
from conclave.bench.runner import run_bench
from conclave.bench.suite import BenchContext, Goal, SuiteResult, Table

__all__ = ["SUITES", "BenchContext", "Goal", "SuiteResult", "Table", "load_suite", "run_bench"]

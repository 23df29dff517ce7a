"""`conclave bench`: benchmark suites that print figures against the issues' goals."""

from conclave.bench.suite import BenchContext, Goal, SuiteResult, Table
from conclave.bench.suite_registry import SUITES, load_suite, suite_summary
from conclave.bench.suite_runner import run_bench
from conclave.bench.task_models import TaskOptions

__all__ = [
    "SUITES",
    "BenchContext",
    "Goal",
    "SuiteResult",
    "Table",
    "TaskOptions",
    "load_suite",
    "run_bench",
    "suite_summary",
]

"""`conclave bench`: benchmark suites that print figures against the issues' goals."""

from conclave.bench.core import (
    SUITES,
    BenchContext,
    Goal,
    SuiteResult,
    Table,
    load_suite,
    run_bench,
    suite_summary,
)
from conclave.bench.tasks import TaskOptions

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

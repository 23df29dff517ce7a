"""`conclave bench`: benchmark suites that print figures against the issues' goals."""

from conclave.bench.core import (
    SUITES,
    BenchContext,
    Goal,
    SuiteOptions,
    SuiteResult,
    Table,
    load_suite,
    run_bench,
    suite_summary,
)

__all__ = [
    "SUITES",
    "BenchContext",
    "Goal",
    "SuiteOptions",
    "SuiteResult",
    "Table",
    "load_suite",
    "run_bench",
    "suite_summary",
]

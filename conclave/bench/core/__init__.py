"""What every bench suite shares: the context a suite runs in and the result it returns, the
registry of suites, the runner, the report and its plots, timing, statistics, and the small
load tools (a keep-alive HTTP/1.1 client, a child-process server)."""

from conclave.bench.core.child_server import running_child_server
from conclave.bench.core.hop_table import add_hop_rows
from conclave.bench.core.http1 import Http1Connection, encode_request
from conclave.bench.core.processes import alive, children, cpu_seconds, processes_with
from conclave.bench.core.stats import percentile, wilson_interval
from conclave.bench.core.suite import (
    NO_RATE_LIMITS,
    BenchContext,
    Goal,
    SuiteOptions,
    SuiteResult,
    Table,
    measuring_settings,
)
from conclave.bench.core.suite_registry import SUITES, load_suite, suite_summary
from conclave.bench.core.suite_runner import run_bench
from conclave.bench.core.timing import Call, alternated_latencies, latencies, throughput

__all__ = [
    "NO_RATE_LIMITS",
    "SUITES",
    "BenchContext",
    "Call",
    "Goal",
    "Http1Connection",
    "SuiteOptions",
    "SuiteResult",
    "Table",
    "add_hop_rows",
    "alive",
    "alternated_latencies",
    "children",
    "cpu_seconds",
    "encode_request",
    "latencies",
    "load_suite",
    "measuring_settings",
    "percentile",
    "processes_with",
    "run_bench",
    "running_child_server",
    "suite_summary",
    "throughput",
    "wilson_interval",
]

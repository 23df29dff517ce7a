from __future__ import annotations

import statistics
from pathlib import Path

import pytest

from tools.harness.faults import sample_latency_ms
from tools.registry import ToolArgumentsError, default_registry
from tools.tool_exceptions import tool_exception_code

pytestmark = pytest.mark.usefixtures("fault_workspace")


@pytest.fixture
def fault_workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CONCLAVE_WORKSPACE", str(tmp_path))


def _call(name: str, **arguments: object) -> object:
    registered = default_registry.get(name)
    assert registered is not None, f"{name} is not registered"
    return registered.invoke(dict(arguments))


def _code(name: str, **arguments: object) -> str:
    with pytest.raises(Exception) as raised:
        _call(name, **arguments)
    return tool_exception_code(raised.value)


def test_latency_is_seeded_and_heavy_tailed() -> None:
    draws = [sample_latency_ms("pareto", 20, 1.5, seed) for seed in range(2_000)]
    assert draws[:5] == [sample_latency_ms("pareto", 20, 1.5, s) for s in range(5)]
    assert 18 <= statistics.median(draws) <= 22
    assert max(draws) > 20 * 30  # the tail reaches far beyond the median
    lognormal = [sample_latency_ms("lognormal", 20, 0.8, s) for s in range(2_000)]
    assert 18 <= statistics.median(lognormal) <= 22


def test_heavy_tailed_sleep_sleeps_what_it_says() -> None:
    assert _call("heavy_tailed_sleep", distribution="fixed", median_ms=5) == 5


def test_each_failure_mode_maps_to_its_serf_code() -> None:
    assert _code("flaky", key="a", failures=2) == "UPSTREAM_UNAVAILABLE"
    assert _code("flaky", key="a", failures=2) == "UPSTREAM_UNAVAILABLE"
    assert _call("flaky", key="a", failures=2) == 3
    assert _call("rate_limited", key="r", limit=1, window_ms=60_000) == 1
    assert _code("rate_limited", key="r", limit=1, window_ms=60_000) == "RATE_LIMITED"
    assert _code("forbidden", path="/etc/shadow") == "PERMISSION_DENIED"
    assert _code("broken") == "TOOL_FAILED"
    assert _call("versioned_put", key="v", expected_version=0) == 1
    assert _code("versioned_put", key="v", expected_version=0) == "STATE_CONFLICT"
    assert _call("version_of", key="v") == 1


def test_bad_arguments_are_refused_with_hints() -> None:
    with pytest.raises(ToolArgumentsError) as refused:
        _call("strict_args", count=0)
    assert "count" in refused.value.hints
    assert _call("strict_args", count=3, unit="s") == "3 s"


def test_tool_exception_names_from_the_runner_map_too() -> None:
    assert tool_exception_code("tools.tool_exceptions.ToolRateLimited") == "RATE_LIMITED"
    assert tool_exception_code("ConnectionResetError") == "UPSTREAM_UNAVAILABLE"
    assert tool_exception_code("ZeroDivisionError") == "TOOL_FAILED"

"""What a benchmark suite is: a function from a `BenchContext` to a `SuiteResult`.

Suites print nothing themselves; the runner renders their tables, checks their goals and
writes their results as JSON, so every suite reports the same way.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeVar

from rich.progress import Progress

from conclave.stack import EmbeddedStack
from gateway import Settings

# Settings for a suite's own gateway when it measures throughput: the rate limiters out of the
# way, so a figure is the platform's work and never the limiter's refusals (16 agents of one
# tenant committing pass the default 1,000/s tenant bucket).
NO_RATE_LIMITS: dict[str, Any] = {
    "rate_limit_per_s": 1_000_000.0,
    "rate_limit_burst": 1_000_000,
    "tenant_rate_limit_per_s": 1_000_000.0,
    "tenant_rate_limit_burst": 1_000_000,
}


def measuring_settings(base: Settings, **overrides: Any) -> Settings:
    """A suite's own gateway for measuring: on the bench's Redis, on any free port, tools run
    in-process, quiet logs and `NO_RATE_LIMITS`; `overrides` change any of it."""
    defaults: dict[str, Any] = {"port": 0, "sandbox_backend": "inprocess", "log_level": "warning"}
    return Settings(redis_url=base.redis_url, **{**defaults, **NO_RATE_LIMITS, **overrides})


class SuiteOptions(Protocol):
    """A suite's own options from the command line (the tasks suite's `TaskOptions`): the core
    carries them to the suite by its name, and knows nothing else of them."""

    def sample_note(self) -> str | None:
        """When the options make the suite run a part of its work only: that part, in words
        ("a sample of 3 tasks a part"), for the report's line on what ran."""
        ...


Options = TypeVar("Options", bound=SuiteOptions)


@dataclass
class Table:
    title: str
    columns: list[str]
    rows: list[list[Any]] = field(default_factory=list)


@dataclass
class Goal:
    """A target from an issue, checked against what this run measured."""

    name: str
    target: str
    measured: str
    met: bool


@dataclass
class SuiteResult:
    suite: str
    tables: list[Table] = field(default_factory=list)
    goals: list[Goal] = field(default_factory=list)
    figures: dict[str, float] = field(default_factory=dict)  # headline numbers for the summary
    series: dict[str, Any] = field(default_factory=dict)  # raw data for the report's plots
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0  # how long the suite ran (set by the runner)
    error: str | None = None  # why the suite stopped before its end (set by the runner)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class BenchContext:
    stack: EmbeddedStack
    quick: bool
    seed: int
    out_dir: Path
    progress: Progress
    # each suite's own options, by suite name; a suite reads its own with `options_of`
    options: Mapping[str, SuiteOptions] = field(default_factory=dict)
    chains: int | None = None  # `conclave bench budgets --chains`: None, the suite's own count
    # `conclave bench conformance --requirements R`: the suite's 0.2 line for MCP revision R
    conformance_requirements: str | None = None

    def options_of(self, suite: str, kind: type[Options]) -> Options:
        """The options `suite` was given, else its defaults (`kind()`)."""
        given = self.options.get(suite)
        if given is None:
            return kind()
        if not isinstance(given, kind):
            raise TypeError(f"{suite}'s options are a {kind.__name__}, not {type(given).__name__}")
        return given

    def gateway_log(self, name: str) -> Path:
        """Where a suite's own gateway logs: next to the results, not over the tables."""
        return self.out_dir / f"{name}-gateway.log"


Suite = Callable[[BenchContext], SuiteResult]

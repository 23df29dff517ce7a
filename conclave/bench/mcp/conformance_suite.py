"""`conclave bench conformance`: the official MCP conformance suite, direct and through Conclave.

The suite's server scenarios (npm `@modelcontextprotocol/conformance`, pinned; see
`conformance_cli`) run three times against one fixture server
(`tools.harness.conformance_server`, which serves everything the scenarios call):

- direct: the fixture over streamable HTTP;
- via mcp_http: Conclave's `/mcp` with the fixture federated as an `mcp_http` source;
- via mcp_stdio: Conclave's `/mcp` with the fixture as an `mcp_stdio` source, started in the
  caller's own bwrap sandbox (docker's runtime image has no fastmcp).

The suite sends no header, so a token-adding proxy (`token_proxy`) stands in front of the
gateway. Conclave serves a source's tools and prompts under its name (`fx.test_simple_text`)
and has no option to serve them under their own, which the scenarios call: the proxy maps the
names, so the figures measure what Conclave does with the traffic, not the prefix.

`--requirements 2026-07-28` (or another revision) runs the 0.2 line's scenarios for that
revision instead of the 0.1 line's active suite.

Goal (issue 24): through Conclave, every scenario that passes directly passes too.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path

import httpx

from conclave.bench.core import (
    BenchContext,
    Goal,
    SuiteResult,
    Table,
    measuring_settings,
    running_child_server,
)
from conclave.bench.mcp.conformance_cli import (
    DEFAULT_SUITE,
    STATELESS_SUITE,
    ConformanceSuite,
    ConformanceUnavailable,
    ScenarioOutcome,
    node_tools,
    run_conformance,
)
from conclave.stack import EmbeddedStack, free_port
from gateway import Settings
from sandbox import bwrap_status

SOURCE = "fx"
DIRECT = "direct"
VIA_HTTP = "via mcp_http"
VIA_STDIO = "via mcp_stdio"
FIXTURE_MODULE = "tools.harness.conformance_server"
# Where isolating sandboxes mount the `tools` package (sandbox.layout).
SANDBOX_FIXTURE = "/opt/conclave/code/tools/harness/conformance_server.py"
# A served tool whose name, minus its own, is the prefix Conclave puts on the source's names.
_PROBE_TOOL = "test_simple_text"


@dataclass
class ConformanceRun:
    """One path's outcomes by scenario, and how long the suite took on it."""

    path: str
    outcomes: dict[str, ScenarioOutcome] = field(default_factory=dict)
    seconds: float = 0.0

    @property
    def passing(self) -> set[str]:
        return {name for name, outcome in self.outcomes.items() if outcome.ok}


@contextlib.contextmanager
def running_fixture() -> Iterator[str]:
    """The fixture over streamable HTTP in a child process; yields its MCP URL."""
    port = free_port()
    with running_child_server([FIXTURE_MODULE, "--port", str(port)], port):
        yield f"http://127.0.0.1:{port}/mcp"


# Every fixture tool answers in well under a second, except those that wait for the client
# (sampling, elicitation): where Conclave relays no such request, they wait until the call's
# time limit, so a short one keeps the run short. The stdio fixture must also start (import
# fastmcp, answer initialize) within it, which takes seconds on a loaded 2-core machine; and
# its Python with fastmcp loaded needs more memory than a tool's default.
_HTTP_INTENT = "intent = { timeout_ms = 5000 }\n"
_STDIO_INTENT = "intent = { timeout_ms = 60000, memory_mb = 1024 }\n"


def http_source_config(fixture_url: str) -> str:
    source = f'[[source]]\nname = "{SOURCE}"\nkind = "mcp_http"\nurl = "{fixture_url}"\n'
    return source + _HTTP_INTENT


def stdio_source_config() -> str:
    # The host's interpreter (bwrap binds it at its own path) has fastmcp; the sandbox's
    # python3 may not.
    command = f'["{sys.executable}", "{SANDBOX_FIXTURE}", "--stdio"]'
    source = f'[[source]]\nname = "{SOURCE}"\nkind = "mcp_stdio"\ncommand = {command}\n'
    return source + _STDIO_INTENT


def served_prefix(gateway_url: str, token: str) -> str:
    """What Conclave puts before the fixture's own names (`fx.` today), read off its
    `tools/list` rather than assumed, so a changed separator needs no change here."""
    headers = {"Authorization": f"Bearer {token}", "Accept": "application/json, text/event-stream"}
    message = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    answer = httpx.post(f"{gateway_url}/mcp", json=message, headers=headers, timeout=60)
    answer.raise_for_status()
    body = answer.text
    if answer.headers.get("content-type", "").startswith("text/event-stream"):
        body = [line[5:] for line in body.splitlines() if line.startswith("data:")][-1]
    names: list[str] = [tool["name"] for tool in json.loads(body)["result"]["tools"]]
    for name in names:
        if name.endswith(_PROBE_TOOL) and name.startswith(SOURCE):
            return name.removesuffix(_PROBE_TOOL)
    raise RuntimeError(f"the gateway does not serve the fixture's {_PROBE_TOOL}: {names}")


@contextlib.contextmanager
def proxied(gateway: EmbeddedStack, scratch: Path, *, rename: bool = True) -> Iterator[str]:
    """A token-adding proxy in front of `gateway` (and the name mapping unless `rename` is
    off); yields the MCP URL the suite is pointed at."""
    token = gateway.token("conformance", "suite", ["tool:*"])
    prefix = served_prefix(gateway.url, token) if rename else ""
    token_file = scratch / "token"
    token_file.write_text(token, "utf-8")
    token_file.chmod(0o600)
    port = free_port()
    argv = ["conclave.bench.mcp.token_proxy", "--port", str(port), "--target", gateway.url]
    argv += ["--token-file", str(token_file), "--rename-prefix", prefix]
    with running_child_server(argv, port):
        yield f"http://127.0.0.1:{port}/mcp"


def _run(path: str, url: str, suite: ConformanceSuite) -> ConformanceRun:
    began = time.perf_counter()
    outcomes = run_conformance(url, suite)
    return ConformanceRun(path, outcomes, time.perf_counter() - began)


def run_direct(suite: ConformanceSuite = DEFAULT_SUITE) -> ConformanceRun:
    with running_fixture() as url:
        return _run(DIRECT, url, suite)


@contextlib.contextmanager
def through_gateway(
    kind: str,
    base: Settings,
    scratch: Path,
    *,
    log_path: Path | None = None,
    rename: bool = True,
) -> Iterator[str]:
    """A gateway of its own (on `base`'s Redis) with the fixture as a `kind` source, behind
    the token proxy: "mcp_http" (fixture in a child process, no sandbox in the path) or
    "mcp_stdio" (the fixture in each caller's bwrap sandbox); yields the proxy's MCP URL."""
    config = scratch / f"conformance-{kind}.toml"
    with contextlib.ExitStack() as stack:
        if kind == "mcp_http":
            config.write_text(http_source_config(stack.enter_context(running_fixture())))
            backend = "inprocess"
        else:
            config.write_text(stdio_source_config())
            backend = "bwrap"
        settings = measuring_settings(base, sandbox_backend=backend, config=config)
        gateway = EmbeddedStack(settings, log_path=log_path)
        # (Not `with EmbeddedStack(...)`: entering starts it again, a second gateway.)
        gateway.start(timeout_s=120)
        stack.callback(gateway.stop)
        yield stack.enter_context(proxied(gateway, scratch, rename=rename))


def run_via_gateway(
    kind: str,
    base: Settings,
    scratch: Path,
    suite: ConformanceSuite = DEFAULT_SUITE,
    *,
    log_path: Path | None = None,
    rename: bool = True,
) -> ConformanceRun:
    """The suite through a gateway of its own with the fixture as a `kind` source
    (`through_gateway`)."""
    with through_gateway(kind, base, scratch, log_path=log_path, rename=rename) as url:
        return _run(VIA_HTTP if kind == "mcp_http" else VIA_STDIO, url, suite)


def suite_for(requirements: str | None) -> ConformanceSuite:
    """The 0.1 line's active suite, or the 0.2 line's scenarios for one MCP revision."""
    if requirements is None:
        return DEFAULT_SUITE
    return replace(STATELESS_SUITE, selection=("--requirements", requirements))


def run(ctx: BenchContext, suite: ConformanceSuite | None = None) -> SuiteResult:
    suite = suite or suite_for(ctx.conformance_requirements)
    try:
        node_tools(suite)
    except ConformanceUnavailable as exc:  # the other suites of a full pass still run
        result = SuiteResult("conformance", notes=[f"not run: {exc}"])
        result.goals.append(
            Goal("conformance through Conclave: every scenario passing alone passes",
                 "all", "not run", False)
        )  # fmt: skip
        return result
    runs: list[ConformanceRun] = []
    task = ctx.progress.add_task(f"conformance: {suite.label}, 3 paths", total=3)
    runs.append(run_direct(suite))
    ctx.progress.advance(task)
    scratch = ctx.out_dir / "conformance"
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir(parents=True)
    kinds = ["mcp_http", "mcp_stdio"]
    no_bwrap = bwrap_status()
    if no_bwrap is not None:
        kinds.remove("mcp_stdio")
    for kind in kinds:
        log = ctx.gateway_log(f"conformance-{kind}")
        runs.append(run_via_gateway(kind, ctx.stack.settings, scratch, suite, log_path=log))
        ctx.progress.advance(task)
    result = report(runs, suite)
    if no_bwrap is not None:
        result.notes.append(f"no mcp_stdio column: the fixture runs in a bwrap sandbox: {no_bwrap}")
    return result


def report(runs: list[ConformanceRun], suite: ConformanceSuite) -> SuiteResult:
    """The scenario table (pass/FAIL per path), totals, goals and each failure's reason."""
    direct, *through = runs
    scenarios = list(direct.outcomes)
    for other in through:
        scenarios += [name for name in other.outcomes if name not in scenarios]
    table = Table(f"conformance: {suite.label}", ["scenario", *(r.path for r in runs)])
    for name in scenarios:
        cells = []
        for one in runs:
            outcome = one.outcomes.get(name)
            cells.append("-" if outcome is None else "pass" if outcome.ok else "FAIL")
        table.rows.append([name, *cells])
    table.rows.append(["total passed", *(f"{len(r.passing)} of {len(r.outcomes)}" for r in runs)])
    table.rows.append(["suite run (s)", *(round(r.seconds, 1) for r in runs)])
    result = SuiteResult("conformance", tables=[table])
    for one in runs:
        result.figures[f"{one.path} passed"] = len(one.passing)
        result.figures[f"{one.path} seconds"] = one.seconds
        result.series[one.path] = {
            name: list(outcome.failures) for name, outcome in one.outcomes.items()
        }
    for one in through:
        lost = sorted(direct.passing - one.passing)
        result.goals.append(
            Goal(
                f"conformance {one.path}: every scenario passing directly passes",
                f"{len(direct.passing)} of {len(direct.passing)}",
                f"{len(direct.passing) - len(lost)} of {len(direct.passing)}",
                not lost,
            )
        )
        for name in lost:
            first = one.outcomes[name].failures[0] if name in one.outcomes else "not run"
            result.notes.append(f"{one.path}: {name}: {first}")
    result.notes.append(
        "The suite connects without a header: a proxy adds the gateway token and maps the"
        f" fixture's names to the served ones (source {SOURCE!r}), since Conclave has no"
        " option to serve a source's tools and prompts under their own names"
    )
    return result

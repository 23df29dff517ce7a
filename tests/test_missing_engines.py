"""A test that needs Docker or bubblewrap fails when it is missing, unless skips are allowed.

`bash .ci/test --allow-skip` sets CONCLAVE_ALLOW_SKIP=1; without it, and always in CI, a
missing engine is a failure that names what to install, never a quiet skip.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.system  # starts stacks or engines in its tests' bodies

ROOT = Path(__file__).resolve().parent.parent

NEEDS_ENGINES = """
def test_needs_docker(docker_engine):
    pass

def test_needs_bwrap(bwrap_available):
    pass
"""


def _run(tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """pytest on two tests needing the engines, on a machine where neither can be found."""
    (tmp_path / "test_needs_engines.py").write_text(NEEDS_ENGINES)
    empty = tmp_path / "bin"
    empty.mkdir(exist_ok=True)
    base = {k: v for k, v in os.environ.items() if k not in ("CI", "CONCLAVE_ALLOW_SKIP")}
    base.update(PATH=str(empty), DOCKER_HOST=f"unix://{tmp_path}/no-engine.sock", **env)
    command = [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "tests.conftest"]
    command += ["-p", "no:cacheprovider", str(tmp_path / "test_needs_engines.py")]
    return subprocess.run(
        command, cwd=ROOT, env=base, capture_output=True, text=True, timeout=120, check=False
    )


def test_a_missing_engine_fails_by_default(tmp_path: Path) -> None:
    done = _run(tmp_path)
    assert done.returncode == 1, done.stdout
    assert "2 errors" in done.stdout
    assert "bubblewrap is required" in done.stdout
    assert "Docker is required" in done.stdout


def test_allow_skip_skips_with_the_reason(tmp_path: Path) -> None:
    done = _run(tmp_path, CONCLAVE_ALLOW_SKIP="1")
    assert done.returncode == 0, done.stdout
    assert "2 skipped" in done.stdout
    assert "bubblewrap is not installed" in done.stdout


@pytest.mark.parametrize("ci", ["true", "1"])
def test_ci_never_allows_skips(tmp_path: Path, ci: str) -> None:
    done = _run(tmp_path, CONCLAVE_ALLOW_SKIP="1", CI=ci)
    assert done.returncode == 1, done.stdout
    assert "2 errors" in done.stdout


def test_ci_test_passes_allow_skip_to_the_tests() -> None:
    script = (ROOT / ".ci" / "test").read_text()
    assert 'if [ "$arg" = --allow-skip ]; then CONCLAVE_ALLOW_SKIP=1' in script
    assert "export CONCLAVE_ALLOW_SKIP=0" in script

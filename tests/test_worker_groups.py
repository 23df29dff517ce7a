"""`--dist loadgroup` keeps the tests that share a wide-scoped fixture on one worker.

The tiers' hook (tests/tiers.py) marks each such test with its `xdist_group`; pytest-xdist
then sends a group to one worker. When that breaks (pytest 9.2 with pytest-xdist 3.8: the
group went into an attribute pytest no longer reads), nothing fails loudly: each worker sets
the shared stack up again, and tests sharing a fixed port on several workers reset each
other's connections (tests/security/test_egress.py's "internet"). This runs a small suite on
three workers, as .ci/test does, and asks which workers ran one module's tests.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

_CONFTEST = "from tests.tiers import pytest_collection_modifyitems  # noqa: F401\n"
_SUITE = """
import os
from pathlib import Path

import pytest


@pytest.fixture(scope="module")
def shared() -> Path:
    return Path(os.environ["WORKERS_SEEN"])


@pytest.mark.parametrize("n", range(9))
def test_one_of_a_module(shared: Path, n: int) -> None:
    with shared.open("a") as seen:
        seen.write(os.environ["PYTEST_XDIST_WORKER"] + "\\n")
"""


def test_a_modules_tests_sharing_its_fixture_run_on_one_worker(tmp_path: Path) -> None:
    (tmp_path / "conftest.py").write_text(_CONFTEST)
    (tmp_path / "test_shared.py").write_text(_SUITE)
    seen = tmp_path / "workers"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "WORKERS_SEEN": str(seen)}
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "3"]
    run = subprocess.run(
        [*argv, "--dist", "loadgroup", "--rootdir", str(tmp_path), str(tmp_path)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout + run.stderr
    workers = seen.read_text().split()
    assert len(workers) == 9
    assert len(set(workers)) == 1, f"one module's tests ran on workers {sorted(set(workers))}"

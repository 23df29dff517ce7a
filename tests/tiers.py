"""Which tier each test runs in, and which tests must share a pytest-xdist worker.

Collection marks every test (tests/README.md explains the rules to test writers):

- `system`: the test needs a real service beyond its worker's embedded Redis (a stack under
  uvicorn, a Docker engine, bubblewrap, a Redis Cluster or replica pair, a browser), or sits in
  a folder of such tests (`SYSTEM_FOLDERS`), or is marked `system` by hand. The rest is the
  fast tier: in-process, and free to run on any worker in any order.
- `xdist_group`: a test that uses a costly module- or session-scoped fixture runs on the same
  worker as every other user of that fixture's instance, so it is set up once (`--dist
  loadgroup`): the module's tests for a module-scoped one, the fixture's folder for a
  session-scoped one defined in a folder's conftest (tests/cluster's Redis Cluster).
"""

from __future__ import annotations

from pathlib import PurePosixPath

import pytest

# Folders whose every test runs real stacks, engines, clusters or browsers.
SYSTEM_FOLDERS = frozenset({"e2e", "scale", "cluster", "console", "durability"})
# Fixtures that mean a real engine beyond the worker's embedded Redis.
ENGINE_FIXTURES = frozenset({"docker_engine", "bwrap_available", "sandbox_backend"})
# A test parametrized over one of these sandbox backends runs it (by getfixturevalue).
ISOLATING_BACKENDS = frozenset({"docker", "bwrap"})
# Wide-scoped fixtures that are cheap or already once per worker: they group nothing. So does
# every session-scoped fixture of tests/conftest.py: grouping by it would put the whole suite
# on one worker, and each worker has its own session anyway (its own embedded Redis).
PER_WORKER_FIXTURES = frozenset({"chromium", "artifacts"})
TESTS_ROOT = "tests"
WIDE_SCOPES = ("module", "package", "session")


def _shared_setup(item: pytest.Item) -> str | None:
    """The group of tests that share `item`'s costly wide-scoped fixtures, if it has any."""
    # `_fixtureinfo` is how plugins read a test's resolved fixtures (pytest has no public API).
    definitions = getattr(item, "_fixtureinfo", None)
    if definitions is None:
        return None
    module = item.nodeid.split("::", 1)[0]
    group = None
    for name, defs in definitions.name2fixturedefs.items():
        fixture = defs[-1]
        # A fixture of pytest's or a plugin's (no baseid) is not one of our services.
        if name in PER_WORKER_FIXTURES or not fixture.baseid or fixture.scope not in WIDE_SCOPES:
            continue
        if fixture.scope == "module":
            group = group or module
        elif fixture.baseid != TESTS_ROOT:  # a folder's one instance: its tests share it
            return fixture.baseid
    return group


def _is_system(item: pytest.Item, group: str | None) -> bool:
    if item.get_closest_marker("system") is not None:
        return True
    folders = PurePosixPath(item.nodeid.split("::", 1)[0]).parts[1:-1]
    callspec = getattr(item, "callspec", None)
    params = callspec.params.values() if callspec is not None else ()
    return bool(
        SYSTEM_FOLDERS.intersection(folders)
        or ENGINE_FIXTURES.intersection(getattr(item, "fixturenames", ()))
        or any(isinstance(p, str) and p in ISOLATING_BACKENDS for p in params)
        or group is not None
    )


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects by the marks given here
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    system = set()
    for item in items:
        group = _shared_setup(item)
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(group))
        if _is_system(item, group):
            item.add_marker(pytest.mark.system)
            system.add(item.nodeid)
    # System tests first: xdist hands out work in this order (its biggest groups first), and
    # the short fast tests then fill the workers' gaps instead of a long test ending the run.
    items.sort(key=lambda item: item.nodeid not in system)

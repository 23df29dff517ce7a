"""Settings defaults that depend on the machine."""

from __future__ import annotations

from pathlib import Path

import pytest

from gateway.config import Settings
from gateway.config import settings as settings_module


def test_the_private_engine_is_found_where_the_machine_has_no_engine_of_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("DOCKER_HOST", "CONCLAVE_DOCKER_HOST"):
        monkeypatch.delenv(name, raising=False)
    system, private = tmp_path / "docker.sock", tmp_path / "conclave-docker.sock"
    monkeypatch.setattr(settings_module, "SYSTEM_ENGINE_SOCKET", system)
    monkeypatch.setattr(settings_module, "PRIVATE_ENGINE_SOCKET", private)
    assert Settings().docker_host == f"unix://{system}"  # neither: the usual place, for the hint
    private.touch()  # the set-up's engine runs
    assert Settings().docker_host == f"unix://{private}"
    system.touch()  # the machine's own engine wins
    assert Settings().docker_host == f"unix://{system}"
    monkeypatch.setenv("DOCKER_HOST", "unix:///elsewhere.sock")
    assert Settings().docker_host == "unix:///elsewhere.sock"

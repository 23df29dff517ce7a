"""Settings defaults that depend on the machine."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from conclave.stack.config_file import settings_from
from gateway.config import Settings
from gateway.config import settings as settings_module
from sandbox import SandboxConfig, create_executor


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


@pytest.mark.anyio
async def test_the_sandbox_settings_are_one_value_the_pool_is_built_from(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """CONCLAVE_SANDBOX_* variables, flat keywords and conclave.toml's flat names all land in
    `settings.sandbox`, and the pool built from it has those caps."""
    monkeypatch.setenv("CONCLAVE_SANDBOX_BACKEND", "process")
    monkeypatch.setenv("CONCLAVE_SANDBOX_POOL_MAX", "6")
    monkeypatch.setenv("CONCLAVE_SANDBOX_SPARES", "[256]")
    settings = Settings(data_dir=tmp_path, sandbox_tenant_max=4)
    wanted = SandboxConfig(backend="process", pool_max=6, tenant_max=4, spares=(256,))
    assert settings.sandbox == wanted
    assert settings.model_copy(update={"sandbox_queue_ms": 0}).sandbox.queue_ms == 0
    with pytest.raises(ValidationError):
        settings.model_copy(update={"sandbox_pool_max": 0})  # validated, not kept silently
    config = tmp_path / "conclave.toml"
    config.write_text(f'[gateway]\ndata_dir = "{tmp_path}"\nsandbox_agent_max = 2\n')
    from_file = settings_from(config)
    assert (from_file.sandbox.agent_max, from_file.sandbox.pool_max) == (2, 6)
    pool = create_executor(from_file.sandbox, from_file.engine_hosts, from_file.tool_modules)
    try:
        assert pool.config == from_file.sandbox
        assert (pool.name, pool.tenant_max, pool.agent_max) == ("process", 3, 2)
    finally:
        await pool.aclose()

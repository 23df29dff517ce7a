"""`python` tool sources: the user's own modules, served as `<source>.<tool>` from a sandbox.

Real parts only: docs/tools.md's worked example (a module needing `humanize`, absent from the
runtime image) built into a docker layer and called over HTTP through the embedded stack; a
single-file module, import failures, allow/deny filters and module clashes on bwrap.
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import docker
import httpx
import pytest
from docker.errors import ContainerError
from redis.asyncio import Redis

from conclave.stack import EmbeddedStack
from conclave.stack.config_file import settings_from
from gateway import Settings, create_app, issue_token
from tools.sources import ConfigError

pytestmark = pytest.mark.system  # starts stacks and engines in its tests' bodies

ROOT = Path(__file__).resolve().parents[2]
SECRETS = {"secret": "test-secret-" + "y" * 32, "admin_key": "test-admin-key"}
SINGLE = '''
from tools import tool

@tool
def shout(text: str) -> str:
    """Upper case."""
    return text.upper()

@tool
def whisper(text: str) -> str:
    return text.lower()
'''


def _readme_examples() -> dict[str, str]:
    """docs/tools.md's example blocks, by the name in their marker."""
    text = (ROOT / "docs/tools.md").read_text()
    blocks = re.findall(r"<!-- example: (\S+) -->\n```\w*\n(.*?)```", text, re.S)
    return dict(blocks)


def _conclave(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "conclave", *args]
    return subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=600)


def _write(directory: Path, files: dict[str, str]) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    for name, content in files.items():
        (directory / name).write_text(content)
    return directory / "conclave.toml"


def test_the_readme_example_runs_on_docker_with_its_dependency(
    docker_engine: str, redis_url: str, tmp_path: Path
) -> None:
    examples = _readme_examples()
    config = _write(tmp_path, {k: v for k, v in examples.items() if k != "commands"})
    client = docker.DockerClient(base_url=docker_engine)
    try:  # the dependency is not in the runtime image: only the source's layer brings it
        with pytest.raises(ContainerError):
            client.containers.run(
                Settings().sandbox.image, ["python3", "-c", "import humanize"], remove=True
            )
    finally:
        client.close()
    for line in examples["commands"].splitlines():
        command = line.split("#")[0].split()
        assert command[0] == "conclave"
        done = _conclave(*command[1:], cwd=tmp_path)
        assert done.returncode == 0, done.stdout + done.stderr
        if command[1:3] == ["tools", "check"]:
            assert "ok    human (python): human__natural_size" in done.stdout
        if command[1:3] == ["tools", "list"]:
            assert re.search(r"human\s+human__natural_size\s+.*docker", done.stdout)
            assert "human__ordinal" not in done.stdout  # denied
    settings = settings_from(config, redis_url=redis_url, port=0, **SECRETS)
    assert settings.sandbox.backend == "docker"  # from the file's [gateway] table
    with EmbeddedStack(settings) as stack:
        bearer = {"Authorization": f"Bearer {stack.token('acme', 'ops', ['tool:human.*'])}"}
        listed = httpx.get(f"{stack.url}/v1/tools", headers=bearer).json()
        assert [t["name"] for t in listed] == ["human__natural_size"]
        call = httpx.post(
            f"{stack.url}/v1/tools/human__natural_size/call",
            json={"arguments": {"num_bytes": 3000000}},
            headers=bearer,
            timeout=60,
        )
        assert call.status_code == 200, call.text
        assert call.json()["result"] == "3.0 MB"
        assert call.json()["usage"]["sandbox"].startswith("docker:")
        bad = httpx.post(
            f"{stack.url}/v1/tools/human.natural_size/call",
            json={"arguments": {"num_bytes": "many"}},
            headers=bearer,
        )
        assert bad.status_code == 422 and bad.json()["code"] == "INVALID_ARGUMENTS"


@pytest.fixture
async def bwrap_gateway(
    bwrap_available: None, redis_url: str, redis: Redis, tmp_path: Path
) -> AsyncIterator[tuple[httpx.AsyncClient, dict[str, str]]]:
    """A gateway on bwrap serving a single-file source (one tool denied), a source that fails
    to import, and the built-ins; in-process over ASGI, on an emptied Redis (an earlier test
    may have revoked the agent name this token uses)."""
    config = _write(
        tmp_path,
        {
            "single.py": SINGLE,
            "broken.py": "import a_module_nobody_has\n",
            "conclave.toml": (
                '[[source]]\nname = "text"\nkind = "python"\npath = "single.py"\n'
                'deny = ["whisper"]\n\n'
                '[[source]]\nname = "broken"\nkind = "python"\npath = "broken.py"\n'
            ),
        },
    )
    settings = Settings(
        redis_url=redis_url,
        sandbox_backend="bwrap",
        allowed_hosts=("gateway",),
        config=config,
        **SECRETS,
    )
    token = issue_token(settings, tenant="acme", agent="writer", scopes=["tool:*"])
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://gateway") as client:
            yield client, {"Authorization": f"Bearer {token}"}


@pytest.mark.anyio
async def test_a_single_file_source_on_bwrap_with_its_filters(
    bwrap_gateway: tuple[httpx.AsyncClient, dict[str, str]],
) -> None:
    client, bearer = bwrap_gateway
    names = {t["name"] for t in (await client.get("/v1/tools", headers=bearer)).json()}
    assert "text__shout" in names and "echo" in names
    assert "text__whisper" not in names  # denied
    assert not any(n.startswith("broken__") for n in names)  # failed to import
    call = await client.post(
        "/v1/tools/text.shout/call", json={"arguments": {"text": "hi"}}, headers=bearer
    )
    assert call.status_code == 200, call.text
    assert call.json()["result"] == "HI" and call.json()["usage"]["sandbox"].startswith("bwrap:")
    echo = await client.post(
        "/v1/tools/echo/call", json={"arguments": {"message": "still"}}, headers=bearer
    )
    assert echo.status_code == 200, echo.text
    for refused in ("text.whisper", "text__whisper", "broken.anything", "broken__anything"):
        answer = await client.post(f"/v1/tools/{refused}/call", json={}, headers=bearer)
        assert answer.status_code == 404
        assert answer.json()["code"] == "TOOL_NOT_FOUND" and not answer.json()["retryable"]


@pytest.mark.anyio
async def test_a_single_file_tool_module_imports_in_the_sandbox(
    bwrap_available: None, redis_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A single-file module in CONCLAVE_TOOL_MODULES was mounted without its `.py`, so the
    runner could not import it and every call failed with a retryable SANDBOX_UNAVAILABLE."""
    module = SINGLE.replace("shout", "h1_shout").replace("whisper", "h1_whisper")
    (tmp_path / "h1_single_file_tools.py").write_text(module)
    monkeypatch.syspath_prepend(str(tmp_path))
    settings = Settings(
        redis_url=redis_url,
        sandbox_backend="bwrap",
        allowed_hosts=("gateway",),
        tool_modules=("tools.builtin", "h1_single_file_tools"),
        **SECRETS,
    )
    token = issue_token(settings, tenant="acme", agent="a", scopes=["tool:*"])
    bearer = {"Authorization": f"Bearer {token}"}
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://gateway") as client:
            call = await client.post(
                "/v1/tools/h1_shout/call", json={"arguments": {"text": "ok"}}, headers=bearer
            )
    assert call.status_code == 200, call.text
    assert call.json()["result"] == "OK"


def test_tools_check_names_each_source_that_cannot_be_served(
    bwrap_available: None, tmp_path: Path
) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    (tmp_path / "a" / "helpers.py").write_text(SINGLE)
    (tmp_path / "b" / "helpers.py").write_text(SINGLE)
    config = _write(
        tmp_path,
        {
            "broken.py": "raise RuntimeError('no database here')\n",
            "conclave.toml": (
                '[gateway]\nsandbox_backend = "bwrap"\n\n'
                '[[source]]\nname = "a"\nkind = "python"\npath = "a/helpers.py"\n\n'
                '[[source]]\nname = "b"\nkind = "python"\npath = "b/helpers.py"\n\n'
                '[[source]]\nname = "broken"\nkind = "python"\npath = "broken.py"\n'
            ),
        },
    )
    done = _conclave("tools", "check", str(config), cwd=tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert "ok    a (python): a__shout, a__whisper" in lines
    assert any(
        line.startswith("FAIL  b (python): module 'helpers' is also source 'a''s") for line in lines
    ), lines
    assert "FAIL  broken (python): broken failed to import: RuntimeError: no database here" in lines


@pytest.mark.parametrize("backend", ["docker", "bwrap"])
def test_a_misspelt_requirement_shows_pips_own_error(
    backend: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """pip's ERROR line, not the first WARNING it printed before it (a configured index
    location that does not exist, on this machine)."""
    request.getfixturevalue("docker_engine" if backend == "docker" else "bwrap_available")
    config = _write(
        tmp_path,
        {
            "mine.py": SINGLE,
            "conclave.toml": (
                f'[gateway]\nsandbox_backend = "{backend}"\n\n[[source]]\nname = "mine"\n'
                'kind = "python"\npath = "mine.py"\nrequirements = ["humanzie-nope>=4"]\n'
            ),
        },
    )
    done = _conclave("tools", "check", str(config), cwd=tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    line = next(line for line in done.stdout.splitlines() if line.startswith("FAIL  mine"))
    assert "ERROR: No matching distribution found for humanzie-nope>=4" in line, done.stdout
    assert "WARNING" not in line


def test_config_errors_are_one_line_each_and_the_environment_wins(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bad = _write(
        tmp_path,
        {
            "conclave.toml": (
                '[gateway]\nport = "eighty"\nbogus = 1\n\n'
                '[[source]]\nname = "Bad Name"\nkind = "python"\npath = "x.py"\n'
            )
        },
    )
    done = _conclave("serve", "--config", str(bad), cwd=tmp_path)
    assert done.returncode != 0
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "source 'Bad Name': name" in lines[0], lines
    good = _write(tmp_path / "good", {"conclave.toml": "[gateway]\nport = 9999\nbogus = 1\n"})
    with pytest.raises(ConfigError, match=r"gateway\.bogus: not a gateway setting"):
        settings_from(good)
    (tmp_path / "good" / "conclave.toml").write_text(
        '[gateway]\nport = 9999\nlog_level = "debug"\n'
    )
    monkeypatch.setenv("CONCLAVE_PORT", "7777")
    settings = settings_from(good)
    assert settings.port == 7777 and settings.log_level == "debug"

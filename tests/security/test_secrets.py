"""Secrets and start-up refusals (issue 13, WP-D): no built-in secret, none in an environment
a tool can read, no public bind on generated secrets, no silent unisolated fall-back, and a
Host allow-list against DNS rebinding."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from conclave.stack import EmbeddedStack
from gateway import Settings, create_app, issue_token, verify_token

pytestmark = pytest.mark.anyio

CONCLAVE = str(Path(sys.executable).parent / "conclave")

# Run inside the sandbox: every place a tool could find the gateway's secrets. The secret
# values are given to it so it reports only where it found them, not what it read.
ATTACK = """
import glob, os
wanted = {WANTED!r}
places = glob.glob('/proc/[0-9]*/environ') + glob.glob('/proc/[0-9]*/cmdline')
ancestors, pid = [], os.getppid()
while pid > 1 and len(ancestors) < 10:
    ancestors.append(pid)
    try:
        status = open(f'/proc/{{pid}}/status').read()
    except OSError:
        break
    pid = int(status.split('PPid:')[1].split()[0])
places += [f'/proc/{{p}}/environ' for p in [*ancestors, {GATEWAY_PID}]]
places += [os.path.join({DATA_DIR!r}, name) for name in ('secret', 'admin_key')]
read, leaks = 0, []
for place in places:
    try:
        with open(place, 'rb') as f:
            text = f.read().decode('latin-1')
    except OSError:
        continue
    read += 1
    leaks += [place for value in wanted if value in text]
leaks += ['os.environ' for value in wanted if value in repr(dict(os.environ))]
{{'read': read, 'leaks': sorted(set(leaks))}}
"""


@pytest.fixture
def data_dir() -> Iterator[Path]:
    """A fresh data dir whose parent anyone may traverse: only its own modes protect it."""
    parent = Path(tempfile.mkdtemp(prefix="conclave-secrets-"))
    parent.chmod(0o755)
    yield parent / "data"
    shutil.rmtree(parent, ignore_errors=True)


def _cli_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CONCLAVE_")}
    return {**env, **extra}


def test_first_run_generates_0600_secrets_and_later_runs_reuse_them(data_dir: Path) -> None:
    first = Settings(data_dir=data_dir)
    assert stat.S_IMODE(data_dir.stat().st_mode) == 0o700
    for name in ("secret", "admin_key"):
        assert stat.S_IMODE((data_dir / name).stat().st_mode) == 0o600
    second = Settings(data_dir=data_dir)
    assert second.secret == first.secret and second.admin_key == first.admin_key
    assert len(first.secret.get_secret_value()) >= 32
    assert not first.secrets_configured
    token = issue_token(first, tenant="t", agent="a", scopes=["tool:*"])
    assert verify_token(second, token).agent == "a"  # a restart keeps issued tokens valid
    other = Settings(data_dir=data_dir.parent / "elsewhere")
    assert other.secret != first.secret  # no built-in value shared between installations


def test_configured_secrets_win_over_the_data_dir(data_dir: Path) -> None:
    configured = Settings(data_dir=data_dir, secret="s" * 40, admin_key="k" * 20)
    assert configured.secrets_configured
    assert configured.secret.get_secret_value() == "s" * 40
    assert not data_dir.exists()


@pytest.mark.parametrize("backend", ["process", "bwrap", "docker"])
def test_a_tool_cannot_read_the_gateways_secrets(
    backend: str, data_dir: Path, redis_url: str, request: pytest.FixtureRequest
) -> None:
    if backend != "process":
        request.getfixturevalue("docker_engine" if backend == "docker" else "bwrap_available")
    settings = Settings(redis_url=redis_url, port=0, sandbox_backend=backend, data_dir=data_dir)
    wanted = [settings.secret.get_secret_value(), settings.admin_key.get_secret_value()]
    with EmbeddedStack(settings) as stack:
        gateway_pid = stack._gateways[0].pid
        # The secrets are not in the gateway's environment at all, for anyone to find.
        environ = Path(f"/proc/{gateway_pid}/environ").read_bytes().decode("latin-1")
        assert not [value for value in wanted if value in environ]
        code = ATTACK.format(WANTED=wanted, GATEWAY_PID=gateway_pid, DATA_DIR=str(data_dir))
        token = stack.token("mallory", "thief", ["tool:*"])
        answer = httpx.post(
            f"{stack.url}/v1/tools/run_python/call",
            json={"arguments": {"code": code}},
            headers={"Authorization": f"Bearer {token}"},
            timeout=60,
        )
    assert answer.status_code == 200, answer.text
    found = answer.json()["result"]["return_value"]
    assert found["read"] > 0  # the attack ran and read what it could
    assert found["leaks"] == []


async def test_a_request_for_another_host_is_refused(settings: Settings, redis_url: str) -> None:
    """A DNS-rebinding page reaches the gateway with its own name in Host: refused before the
    token is even looked at; the configured name (`gateway`, the fixture's) is served."""
    app = create_app(settings)
    token = issue_token(settings, tenant="t", agent="a", scopes=["tool:*"])
    call = {
        "json": {"arguments": {"message": "hi"}},
        "headers": {"Authorization": f"Bearer {token}"},
    }
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://evil.example") as evil:
            rebound = await evil.post("/v1/tools/echo/call", **call)  # the hot path
            health = await evil.get("/healthz")
        async with httpx.AsyncClient(transport=transport, base_url="http://gateway:8321") as ok:
            allowed = await ok.post("/v1/tools/echo/call", **call)
    for refused in (rebound, health):
        assert refused.status_code == 400
        assert refused.json()["code"] == "INVALID_REQUEST"
        assert "CONCLAVE_ALLOWED_HOSTS" in refused.json()["message"]
    assert allowed.status_code == 200, allowed.text


def _serve(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """`conclave serve` expected to refuse: it must exit on its own, well within the timeout."""
    return subprocess.run(
        [CONCLAVE, "serve", "--port", "0", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_serve_refuses_a_public_bind_on_generated_secrets(data_dir: Path) -> None:
    done = _serve("--host", "0.0.0.0", "--data-dir", str(data_dir), env=_cli_env())
    assert done.returncode != 0
    assert "CONCLAVE_SECRET and CONCLAVE_ADMIN_KEY" in done.stderr


def test_serve_refuses_auto_without_an_isolating_backend(data_dir: Path) -> None:
    no_bwrap = str(Path(sys.executable).parent)  # a PATH with python, without bwrap
    env = _cli_env(PATH=no_bwrap, DOCKER_HOST="unix:///nonexistent/docker.sock")
    done = _serve("--data-dir", str(data_dir), env=env)
    assert done.returncode != 0
    assert "Install Docker or bubblewrap" in done.stderr


def test_serve_runs_the_process_backend_only_when_opted_in(data_dir: Path) -> None:
    env = _cli_env(CONCLAVE_SANDBOX_BACKEND="process")
    done = _serve("--data-dir", str(data_dir), env=env)
    assert done.returncode != 0
    assert "--unisolated-process-backend" in done.stderr

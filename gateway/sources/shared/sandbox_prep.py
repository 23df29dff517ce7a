"""What preparing and discovering the sandboxed source kinds (`python`, `mcp_stdio`) share:
the backend that will run their tools, where their prepared directories are kept, the limits
of the calls that list their tools, and, for their host-side prepare steps (each kind's
`prepare`), `pip_install` of their packages and `SourceUnavailable`, the refusal of a source
that cannot be served, and `packages_layer`, the Docker image layer of a source's packages."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import tempfile
from collections.abc import Callable
from functools import partial
from pathlib import Path

import anyio

from gateway.config import Settings
from sandbox import SandboxStartError, source_layer, strongest_available
from tools.calls import CallLimits
from tools.sources import pip_error

DISCOVERY_LIMITS = CallLimits(
    memory_mb=512, cpu_seconds=60, timeout_ms=120_000, max_output_bytes=16 << 20
)


def effective_backend(settings: Settings) -> Settings:
    """The settings with `auto` resolved to the backend that will run the tools."""
    if settings.sandbox.backend != "auto":
        return settings
    picked = strongest_available(settings.docker_host, settings.sandbox.image)
    return settings.model_copy(update={"sandbox_backend": picked.name})


def cache_root(backend: str) -> Path:
    """Where prepared sources are kept: the user's cache, except for the process backend,
    whose runner (under root, a uid of each sandbox's own) cannot pass through a private home
    directory: a directory of ours in the temp dir then, refused if anyone else could have
    planted it."""
    if backend != "process":
        return Path.home() / ".cache" / "conclave"
    root = Path(tempfile.gettempdir()) / f"conclave-sources-{os.getuid()}"
    root.mkdir(mode=0o755, exist_ok=True)
    info = root.lstat()
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o022:
        raise SandboxStartError(f"{root} is not a directory only this user may write: remove it")
    return root


class SourceUnavailable(Exception):
    """A source cannot be served; the message is one line saying why and what to do."""


def pip_install(requirements: tuple[str, ...], target: Path) -> None:
    argv = [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    argv += ["--no-warn-script-location", "--target", str(target), *requirements]
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        said = pip_error(f"{done.stdout}\n{done.stderr}")
        raise SourceUnavailable(f"pip could not install {' '.join(requirements)}: {said}")


async def packages_layer(
    settings: Settings,
    image: str,
    source: str,
    digest: str,
    packages: tuple[str, ...],
    cache: Path,
    say: Callable[[str], None],
) -> str:
    """`image` with a layer holding `source`'s packages (built once per `digest`, in a
    worker thread): the image its sandboxes run on Docker."""
    build = partial(
        source_layer, settings.docker_host, image, source, digest, packages,
        cache_dir=cache, say=say,
    )  # fmt: skip
    return await anyio.to_thread.run_sync(build, abandon_on_cancel=True)

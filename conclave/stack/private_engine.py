"""The private Docker engine the set-up installs (`.ci/lib.sh` start_engine), started by
`conclave serve` when no engine answers, as it starts the embedded Redis.

The set-up runs its own `dockerd` (own socket, data root and exec root, no bridge or iptables:
sandboxes have no network anyway) on a machine with no engine of its own, and its scripts stop
it again when they end; the README's docker examples then found none. So when the docker
backend is wanted (`--backend docker`, or `auto`, which prefers it), the configured engine does
not answer, and it is the set-up's (not a DOCKER_HOST the user pointed elsewhere), `serve`
starts that engine: as root it runs the same `dockerd` command as the set-up, detached, and
waits for it to answer; otherwise it says in one line how to start it. The engine keeps
running after `serve` stops, as the set-up's does: other commands and other gateways use it.
The paths are the set-up's (`.ci/lib.sh`: ENGINE_ROOT, ENGINE_SOCK, ENGINE_PID).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from docker.errors import DockerException

from gateway import Settings
from sandbox import docker_client

START_WITHIN_S = 60.0


@dataclass(frozen=True)
class PrivateEngine:
    """Where the set-up's dockerd keeps its socket and files."""

    socket: Path = Path("/run/conclave-docker.sock")
    data_root: Path = Path("/var/lib/conclave-docker")
    exec_root: Path = Path("/run/conclave-docker")
    pidfile: Path = Path("/run/conclave-docker.pid")
    log: Path = Path("/var/log/conclave-dockerd.log")

    @property
    def host(self) -> str:
        return f"unix://{self.socket}"

    @property
    def installed(self) -> bool:
        """The set-up made its data root and dockerd is on this machine."""
        return self.data_root.is_dir() and shutil.which("dockerd") is not None

    def argv(self) -> list[str]:
        argv = ["dockerd", "--data-root", str(self.data_root), "--exec-root", str(self.exec_root)]
        argv += ["-H", self.host, "--pidfile", str(self.pidfile)]
        return [*argv, "--bridge=none", "--iptables=false"]

    def command(self) -> str:
        """What to run by hand (as root), as one shell line."""
        return f"sudo sh -c 'nohup {' '.join(self.argv())} >>{self.log} 2>&1 &'"


SETUP_ENGINE = PrivateEngine()


class EngineStartError(RuntimeError):
    """The private engine did not answer; the message says what to do."""


def answers(host: str) -> bool:
    """Whether a Docker engine answers a ping at `host` within 2 s."""
    if host.startswith("unix://") and not Path(host[len("unix://") :]).exists():
        return False  # no socket: nothing to ask (and no connection attempt to clean up)
    try:
        client = docker_client(host, timeout=2)
    except (DockerException, OSError):  # requests' connection errors are OSErrors
        return False
    try:
        return bool(client.ping())
    except (DockerException, OSError):
        return False
    finally:
        client.close()


def find_engine(
    settings: Settings, say: Callable[[str], None], engine: PrivateEngine = SETUP_ENGINE
) -> Settings:
    """`settings`, pointing at the private engine once it answers, when the docker backend is
    wanted and the configured engine does not answer; unchanged otherwise. Not root: says how
    to start it and leaves the choice to the backend (auto: bwrap; docker: refused)."""
    if settings.sandbox.backend not in ("auto", "docker") or settings.docker_hosts:
        return settings
    chosen = settings.docker_host
    if chosen != engine.host and "docker_host" in settings.model_fields_set:
        return settings  # pointed elsewhere by the user: theirs to start
    if answers(chosen) or not engine.installed:
        return settings
    moved = settings.model_copy(update={"docker_host": engine.host})
    if answers(engine.host):
        return moved
    if os.geteuid() != 0:
        say(
            f"no Docker engine answers at {chosen}; the private engine the set-up installed is"
            f" stopped: start it with `{engine.command()}`, or use --backend bwrap"
        )
        return settings
    say(f"no Docker engine answers at {chosen}: starting the set-up's private engine")
    _start(engine)
    say(f"the private Docker engine answers at {engine.host} (it keeps running)")
    return moved


def _start(engine: PrivateEngine) -> None:
    engine.exec_root.mkdir(parents=True, exist_ok=True)
    engine.log.parent.mkdir(parents=True, exist_ok=True)
    with engine.log.open("ab") as log:
        # Detached (setsid forks it off and returns): the engine outlives `serve`, as the
        # set-up's does, and is not our child to reap.
        subprocess.run(
            ["setsid", "--fork", *engine.argv()],
            stdout=log,
            stderr=log,
            stdin=subprocess.DEVNULL,
            check=False,
            timeout=30,
        )
    deadline = time.monotonic() + START_WITHIN_S
    while time.monotonic() < deadline:
        if answers(engine.host):
            return
        time.sleep(0.25)
    raise EngineStartError(
        f"the private Docker engine did not answer at {engine.host} within"
        f" {START_WITHIN_S:g} s: see {engine.log}, or use --backend bwrap"
    )

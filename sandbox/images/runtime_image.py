"""The sandbox runtime image, built without a registry and cached by content.

Steps (each skipped when its output already exists for the same inputs):
1. a Debian bookworm root file system from the machine's apt mirror (`debootstrap
   --variant=minbase --include=python3`: Python 3.11), `docker import`ed as the base image;
2. wheels of what tool code imports (pydantic and its dependencies, pinned to the versions
   the host runs) downloaded on the host for CPython 3.11 / manylinux x86_64;
3. a `docker build` FROM that base that COPYs the wheels in, unpacks them into
   dist-packages and precompiles everything: no network inside the build.
The image carries a label with the hash of all inputs; a second run finds it and does nothing.
The tool code itself is not baked in: sandboxes mount it read-only.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import platform
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import docker
from docker.errors import BuildError, DockerException, ImageNotFound

from sandbox.backend import SandboxError
from sandbox.backends.docker_client import docker_client
from tools.sources import pip_error

RECIPE_VERSION = "1"
SUITE = "bookworm"
DEFAULT_MIRROR = "http://deb.debian.org/debian"
SYSTEM_PACKAGES = ("python3",)
# What tool code imports inside the sandbox, pinned to the host's versions.
RUNTIME_DISTRIBUTIONS = (
    "pydantic",
    "pydantic-core",
    "typing-extensions",
    "annotated-types",
    "typing-inspection",
)
HASH_LABEL = "conclave.image.hash"
SITE_PACKAGES = "/usr/local/lib/python3.11/dist-packages"

DOCKERFILE = """\
FROM {base}
COPY wheels /tmp/wheels
RUN python3 -c "import glob, zipfile; [zipfile.ZipFile(w).extractall('{site}') \
for w in sorted(glob.glob('/tmp/wheels/*.whl'))]" \
 && python3 -m compileall -q {site} /usr/lib/python3.11 ; rm -rf /tmp/wheels
LABEL {label}={digest}
"""


class ImageBuildError(SandboxError):
    pass


def apt_mirror() -> str:
    """The Debian mirror this machine's apt uses (deb822 or one-line sources), else the CDN."""
    sources = [Path("/etc/apt/sources.list.d/debian.sources"), Path("/etc/apt/sources.list")]
    for source in sources:
        try:
            lines = source.read_text().splitlines()
        except OSError:
            continue
        for line in lines:
            words = line.split()
            if words[:1] == ["URIs:"] and len(words) > 1 and "security" not in words[1]:
                return words[1]
            if words[:1] == ["deb"] and len(words) > 2 and "security" not in words[-3]:
                return next(w for w in words[1:] if w.startswith("http"))
    return DEFAULT_MIRROR


def pinned_requirements() -> list[str]:
    pins = []
    for name in RUNTIME_DISTRIBUTIONS:
        try:
            pins.append(f"{name}=={importlib.metadata.version(name)}")
        except importlib.metadata.PackageNotFoundError:
            continue
    return pins


def inputs_digest(mirror: str, requirements: list[str]) -> tuple[str, str]:
    """(base digest, full digest): the base depends on the OS recipe only."""
    base = {"recipe": RECIPE_VERSION, "suite": SUITE, "mirror": mirror, "pkgs": SYSTEM_PACKAGES}
    base_digest = hashlib.sha256(json.dumps(base, sort_keys=True).encode()).hexdigest()[:16]
    full = {"base": base_digest, "requirements": requirements, "dockerfile": DOCKERFILE}
    full_digest = hashlib.sha256(json.dumps(full, sort_keys=True).encode()).hexdigest()[:16]
    return base_digest, full_digest


class RuntimeImageBuilder:
    def __init__(
        self,
        docker_host: str,
        tag: str,
        *,
        cache_dir: Path | None = None,
        mirror: str | None = None,
        say: Callable[[str], None] = print,
    ) -> None:
        self.docker_host = docker_host
        self.tag = tag
        self.cache_dir = cache_dir or Path.home() / ".cache" / "conclave"
        self.mirror = mirror or apt_mirror()
        self.say = say
        self.requirements = pinned_requirements()
        self.base_digest, self.digest = inputs_digest(self.mirror, self.requirements)

    def build(self, *, force: bool = False) -> bool:
        """Build the image unless an identical one exists; True when something was built."""
        try:
            client = docker_client(self.docker_host)
        except DockerException as exc:
            raise ImageBuildError(f"Docker engine not reachable at {self.docker_host}") from exc
        try:
            if not force and self._current(client):
                self.say(f"{self.tag} is up to date ({HASH_LABEL}={self.digest})")
                return False
            base = self._base_image(client)
            wheels = self._wheels()
            self._build_final(client, base, wheels)
            return True
        finally:
            client.close()

    def copy_to(self, docker_host: str) -> bool:
        """Load the built image into another engine (`docker save | docker load`, streamed),
        unless it already holds the same one; True when something was copied."""
        try:
            source = docker_client(self.docker_host)
            target = docker_client(docker_host)
        except DockerException as exc:
            raise ImageBuildError(f"Docker engine not reachable: {exc}") from exc
        try:
            if self._current(target):
                self.say(f"{self.tag} is up to date on {docker_host}")
                return False
            self.say(f"docker save {self.tag} | docker -H {docker_host} load")
            target.api.load_image(source.api.get_image(self.tag))
            if not self._current(target):
                raise ImageBuildError(f"{self.tag} did not arrive on {docker_host}")
            return True
        except DockerException as exc:
            raise ImageBuildError(f"copying {self.tag} to {docker_host} failed: {exc}") from exc
        finally:
            source.close()
            target.close()

    def _current(self, client: docker.DockerClient) -> bool:
        try:
            image = client.images.get(self.tag)
        except ImageNotFound:
            return False
        return bool(image.labels.get(HASH_LABEL) == self.digest)

    def _base_image(self, client: docker.DockerClient) -> str:
        base_tag = f"conclave-runtime-base:{self.base_digest}"
        try:
            client.images.get(base_tag)
            return base_tag
        except ImageNotFound:
            pass
        if shutil.which("debootstrap") is None:
            raise ImageBuildError("debootstrap is missing: apt-get install debootstrap")
        with tempfile.TemporaryDirectory(prefix="conclave-rootfs-") as scratch:
            rootfs = Path(scratch) / "rootfs"
            self.say(f"debootstrap {SUITE} from {self.mirror} (about a minute)")
            _run(
                [
                    "debootstrap",
                    "--variant=minbase",
                    f"--include={','.join(SYSTEM_PACKAGES)}",
                    SUITE,
                    str(rootfs),
                    self.mirror,
                ]
            )
            # Trim what a sandbox never needs: apt caches, docs, locales.
            for junk in ("var/cache/apt/archives", "usr/share/doc", "usr/share/man"):
                shutil.rmtree(rootfs / junk, ignore_errors=True)
            self.say(f"docker import -> {base_tag}")
            tar = subprocess.Popen(["tar", "-C", str(rootfs), "-c", "."], stdout=subprocess.PIPE)
            assert tar.stdout is not None
            try:
                client.api.import_image_from_stream(
                    tar.stdout, repository="conclave-runtime-base", tag=self.base_digest
                )
            finally:
                tar.stdout.close()
                tar.wait()
        return base_tag

    def _wheels(self) -> Path:
        target = self.cache_dir / f"wheels-{self.digest}"
        if target.is_dir() and any(target.glob("*.whl")):
            return target
        self.say(f"pip download {' '.join(self.requirements)} (CPython 3.11, manylinux)")
        partial = target.with_name(target.name + ".partial")
        shutil.rmtree(partial, ignore_errors=True)
        partial.mkdir(parents=True)
        _run(download_argv(partial, self.requirements, with_dependencies=False))
        shutil.rmtree(target, ignore_errors=True)
        partial.rename(target)
        return target

    def _build_final(self, client: docker.DockerClient, base: str, wheels: Path) -> None:
        self.say(f"docker build -> {self.tag}")
        with tempfile.TemporaryDirectory(prefix="conclave-image-") as context:
            shutil.copytree(wheels, Path(context) / "wheels")
            dockerfile = DOCKERFILE.format(
                base=base, site=SITE_PACKAGES, label=HASH_LABEL, digest=self.digest
            )
            (Path(context) / "Dockerfile").write_text(dockerfile)
            try:
                client.images.build(
                    path=context, tag=self.tag, rm=True, forcerm=True, network_mode="none"
                )
            except BuildError as exc:
                log = "".join(str(chunk.get("stream", "")) for chunk in exc.build_log)
                raise ImageBuildError(f"docker build failed: {exc}\n{log[-2000:]}") from exc


def download_argv(target: Path, requirements: list[str], *, with_dependencies: bool) -> list[str]:
    """`pip download` of wheels for the image's CPython 3.11 on manylinux (or pure Python)."""
    machine = platform.machine()
    argv = [sys.executable, "-m", "pip", "download", "--quiet", "--disable-pip-version-check"]
    argv += [] if with_dependencies else ["--no-deps"]
    argv += ["--only-binary=:all:", "--python-version", "3.11", "--implementation", "cp"]
    for abi in ("cp311", "abi3", "none"):
        argv += ["--abi", abi]
    for tag in (f"manylinux2014_{machine}", f"manylinux_2_17_{machine}", "any"):
        argv += ["--platform", tag]
    return [*argv, "-d", str(target), *requirements]


def _run(argv: list[str]) -> None:
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    if done.returncode != 0 and argv[1:3] == ["-m", "pip"]:  # pip's error, not its warnings
        wanted = " ".join(a for a in argv[argv.index("-d") + 2 :])
        said = pip_error(f"{done.stdout}\n{done.stderr}")
        raise ImageBuildError(f"pip could not download {wanted}: {said}")
    if done.returncode != 0:
        raise ImageBuildError(
            f"{argv[0]} {argv[1] if len(argv) > 1 else ''} failed ({done.returncode}): "
            f"{(done.stderr or done.stdout)[-2000:]}"
        )

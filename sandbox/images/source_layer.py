"""A `python` tool source's requirements as a Docker image layer, built without a registry.

The layer is built FROM the runtime image (or the layer of the source before it, so several
sources stack): wheels of the requirements and their dependencies are downloaded on the host
(`pip download`, CPython 3.11 manylinux or pure Python), COPYed into a `docker build` with no
network, and unpacked into the image's site directory, as the runtime image's own wheels are
(the image has no pip). Wheels of what the runtime image already carries (pydantic and its
dependencies) are left out, so a source cannot replace them. The tag hashes the parent
image's id and the source's digest (its code and requirements): an unchanged source on an
unchanged parent is found, not rebuilt.

`node_layer` adds the host's `node` (Debian's nodejs package on this bookworm host, the
same release as the runtime image) for `mcp_stdio` sources with npm packages: the binary
and the shared libraries `ldd` lists that the image lacks are COPYed in. The runtime image
is a debootstrap root file system with no apt inside the build, and adding nodejs to its
debootstrap would need the apt mirror and a rebuild of every image; the host's files need
neither.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path

from docker import DockerClient
from docker.errors import BuildError, DockerException, ImageNotFound

from sandbox.backends.docker_client import docker_client
from sandbox.images.runtime_image import (
    HASH_LABEL,
    RUNTIME_DISTRIBUTIONS,
    SITE_PACKAGES,
    ImageBuildError,
    _run,
    download_argv,
)

LAYER_DOCKERFILE = """\
FROM {parent}
COPY wheels /tmp/wheels
RUN python3 -c "import glob, zipfile; [zipfile.ZipFile(w).extractall('{site}') \
for w in sorted(glob.glob('/tmp/wheels/*.whl'))]" \
 && python3 -m compileall -q {site} ; rm -rf /tmp/wheels
LABEL {label}={digest}
"""
NODE_DOCKERFILE = """\
FROM {parent}
COPY node /usr/local/bin/node
COPY libs /tmp/node-libs
RUN for lib in /tmp/node-libs/*; do [ -e "/usr/lib/x86_64-linux-gnu/${{lib##*/}}" ] \
 || cp "$lib" /usr/lib/x86_64-linux-gnu/; done; rm -rf /tmp/node-libs; /usr/local/bin/node -v
LABEL {label}={digest}
"""
_RUNTIME_NAMES = {re.sub(r"[-_.]+", "_", name).lower() for name in RUNTIME_DISTRIBUTIONS}


def source_layer(
    docker_host: str,
    parent: str,
    source: str,
    digest: str,
    requirements: tuple[str, ...],
    *,
    cache_dir: Path | None = None,
    say: Callable[[str], None] = print,
) -> str:
    """The tag of `parent` plus the source's requirements, built unless it already exists."""
    cache = cache_dir or Path.home() / ".cache" / "conclave"
    client, parent_id = _engine_and_parent(docker_host, parent)
    try:
        layer = hashlib.sha256(f"{parent_id}/{digest}".encode()).hexdigest()[:16]
        dockerfile = LAYER_DOCKERFILE.format(
            parent=parent, site=SITE_PACKAGES, label=HASH_LABEL, digest=layer
        )

        def fill(context: Path) -> None:
            wheels = _wheels(cache / f"source-wheels-{digest}", requirements, say)
            say(f"docker build -> conclave-source-{source}:{layer}")
            shutil.copytree(wheels, context / "wheels")

        return _found_or_built(client, f"conclave-source-{source}:{layer}", dockerfile, fill)
    finally:
        client.close()


def _wheels(target: Path, requirements: tuple[str, ...], say: Callable[[str], None]) -> Path:
    """The requirements' wheels (with their dependencies, without the runtime's own)."""
    if target.is_dir():
        return target
    say(f"pip download {' '.join(requirements)} (CPython 3.11, manylinux)")
    partial = target.with_name(target.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    _run(download_argv(partial, list(requirements), with_dependencies=True))
    for wheel in partial.glob("*.whl"):
        if wheel.name.split("-")[0].lower() in _RUNTIME_NAMES:
            wheel.unlink()
    partial.rename(target)
    return target


def node_layer(docker_host: str, parent: str, *, say: Callable[[str], None] = print) -> str:
    """The tag of `parent` plus the host's node, built unless it already exists."""
    node = shutil.which("node")
    if node is None:
        raise ImageBuildError("node is missing on the host: apt-get install nodejs npm")
    binary = Path(node).resolve()
    info = binary.stat()
    client, parent_id = _engine_and_parent(docker_host, parent)
    try:
        identity = f"{parent_id}/{binary}/{info.st_size}/{info.st_mtime_ns}"
        digest = hashlib.sha256(identity.encode()).hexdigest()[:16]
        dockerfile = NODE_DOCKERFILE.format(parent=parent, label=HASH_LABEL, digest=digest)

        def fill(context: Path) -> None:
            say(f"docker build -> conclave-node:{digest} (the host's node)")
            shutil.copy2(binary, context / "node")
            (context / "libs").mkdir()
            for library in _shared_libraries(binary):
                shutil.copy2(library, context / "libs" / library.name)

        return _found_or_built(client, f"conclave-node:{digest}", dockerfile, fill)
    finally:
        client.close()


def _engine_and_parent(docker_host: str, parent: str) -> tuple[DockerClient, str]:
    """A client of the engine at `docker_host`, and the id of the image to build on."""
    try:
        client = docker_client(docker_host)
    except DockerException as exc:
        raise ImageBuildError(f"Docker engine not reachable at {docker_host}: {exc}") from exc
    try:
        return client, client.images.get(parent).id
    except ImageNotFound as exc:
        client.close()
        raise ImageBuildError(
            f"image {parent} is missing: run 'conclave sandbox build-image'"
        ) from exc
    except DockerException as exc:
        client.close()
        raise ImageBuildError(f"cannot build on {parent} at {docker_host}: {exc}") from exc


def _found_or_built(
    client: DockerClient, tag: str, dockerfile: str, fill: Callable[[Path], None]
) -> str:
    """`tag` if the engine has it; else built from `dockerfile`, with no network, in a context
    `fill` puts the files in."""
    try:
        try:
            client.images.get(tag)
            return tag
        except ImageNotFound:
            pass
        with tempfile.TemporaryDirectory(prefix="conclave-layer-") as context:
            fill(Path(context))
            (Path(context) / "Dockerfile").write_text(dockerfile)
            client.images.build(path=context, tag=tag, rm=True, forcerm=True, network_mode="none")
        return tag
    except BuildError as exc:
        log = "".join(str(chunk.get("stream", "")) for chunk in exc.build_log)
        raise ImageBuildError(f"docker build of {tag} failed: {exc}: {log[-500:]}") from exc
    except DockerException as exc:
        raise ImageBuildError(f"docker refused the build of {tag}: {exc}") from exc


def _shared_libraries(binary: Path) -> list[Path]:
    """The libraries `ldd` resolves for `binary` (the loader and vdso aside)."""
    done = subprocess.run(["ldd", str(binary)], capture_output=True, text=True, check=False)
    found = re.findall(r"=> (/\S+)", done.stdout)
    return [Path(path) for path in found]  # copied by these names, the sonames

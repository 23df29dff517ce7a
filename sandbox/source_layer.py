"""A `python` tool source's requirements as a Docker image layer, built without a registry.

The layer is built FROM the runtime image (or the layer of the source before it, so several
sources stack): wheels of the requirements and their dependencies are downloaded on the host
(`pip download`, CPython 3.11 manylinux or pure Python), COPYed into a `docker build` with no
network, and unpacked into the image's site directory, as the runtime image's own wheels are
(the image has no pip). Wheels of what the runtime image already carries (pydantic and its
dependencies) are left out, so a source cannot replace them. The tag hashes the parent
image's id and the source's digest (its code and requirements): an unchanged source on an
unchanged parent is found, not rebuilt.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

import docker
from docker.errors import BuildError, DockerException, ImageNotFound

from sandbox.image import (
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
    try:
        client = docker.DockerClient(base_url=docker_host)
    except DockerException as exc:
        raise ImageBuildError(f"Docker engine not reachable at {docker_host}") from exc
    try:
        try:
            parent_id = client.images.get(parent).id
        except ImageNotFound as exc:
            raise ImageBuildError(
                f"image {parent} is missing: run 'conclave sandbox build-image'"
            ) from exc
        layer = hashlib.sha256(f"{parent_id}/{digest}".encode()).hexdigest()[:16]
        tag = f"conclave-source-{source}:{layer}"
        try:
            client.images.get(tag)
            return tag
        except ImageNotFound:
            pass
        wheels = _wheels(cache / f"source-wheels-{digest}", requirements, say)
        say(f"docker build -> {tag}")
        with tempfile.TemporaryDirectory(prefix="conclave-layer-") as context:
            shutil.copytree(wheels, Path(context) / "wheels")
            dockerfile = LAYER_DOCKERFILE.format(
                parent=parent, site=SITE_PACKAGES, label=HASH_LABEL, digest=layer
            )
            (Path(context) / "Dockerfile").write_text(dockerfile)
            client.images.build(path=context, tag=tag, rm=True, forcerm=True, network_mode="none")
        return tag
    except BuildError as exc:
        log = "".join(str(chunk.get("stream", "")) for chunk in exc.build_log)
        raise ImageBuildError(f"docker build failed: {exc}: {log[-500:]}") from exc
    except DockerException as exc:
        raise ImageBuildError(f"docker refused the build: {exc}") from exc
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

"""The host paths a bubblewrap sandbox sees of the system: `/usr` and what the loader needs,
read-only, and the merged-/usr links (`/bin`, `/lib`, ...) as they are on the host.

Both the backend and its availability probe (`sandbox.backends.detect`) mount exactly these,
never the host's whole root: a recursive bind of `/` remounts every mount under it read-only,
and one a Docker engine is creating or removing at that moment (a container's overlay) fails the
remount with EINVAL, so the probe failed whenever containers started beside it.
"""

from __future__ import annotations

from pathlib import Path

SYSTEM_BINDS = ("/usr", "/etc/ld.so.cache", "/etc/alternatives")


def system_binds() -> list[str]:
    """bwrap's arguments mounting the system's paths (read-only) into the sandbox."""
    argv: list[str] = []
    for path in SYSTEM_BINDS:
        argv += ["--ro-bind-try", path, path]
    for link in ("bin", "lib", "lib64", "sbin"):
        target = Path("/", link)
        if target.is_symlink():
            argv += ["--symlink", str(target.readlink()), str(target)]
        elif target.exists():
            argv += ["--ro-bind", str(target), str(target)]
    return argv

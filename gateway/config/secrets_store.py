"""The gateway's generated secrets: the token-signing secret and the admin key, in the data dir.

Conclave has no built-in secret. The first run writes both, from `secrets.token_urlsafe`, to
files readable by their owner alone (0600, in a 0700 directory); later runs read the same
files, so tokens issued by `conclave token issue` keep verifying across restarts. Secrets
configured explicitly (`CONCLAVE_SECRET`, `CONCLAVE_ADMIN_KEY`) win over the files.
"""

from __future__ import annotations

import logging
import os
import secrets
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger("conclave.gateway")

SECRET_FILE = "secret"
ADMIN_KEY_FILE = "admin_key"


@dataclass(frozen=True)
class StoredSecrets:
    secret: str
    admin_key: str
    created: bool  # True: this call generated them (the data dir's first run)


def default_data_dir(environ: dict[str, str] | os._Environ[str] = os.environ) -> Path:
    """`$XDG_DATA_HOME/conclave`, else `~/.local/share/conclave`."""
    base = environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "conclave"


def load_or_create_secrets(data_dir: Path) -> StoredSecrets:
    """The secrets stored in `data_dir`, generated there first when it holds none."""
    data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(data_dir, 0o700)  # mkdir's mode is masked, and the directory may predate us
    created = False
    values: list[str] = []
    for name in (SECRET_FILE, ADMIN_KEY_FILE):
        value, new = _read_or_write(data_dir / name)
        values.append(value)
        created = created or new
    if created:
        log.warning("generated a new token secret and admin key in %s (0600)", data_dir)
    return StoredSecrets(secret=values[0], admin_key=values[1], created=created)


def _read_or_write(path: Path) -> tuple[str, bool]:
    if path.exists():
        return _read(path), False
    # Written aside, then linked into place: of two processes starting at once, one links and
    # the other reads that value; neither ever sees a half-written file.
    draft = path.with_name(f".{path.name}.{os.getpid()}")
    fd = os.open(draft, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    value = secrets.token_urlsafe(32)
    with os.fdopen(fd, "w") as out:
        out.write(value + "\n")
    try:
        os.link(draft, path)
    except FileExistsError:
        return _read(path), False
    finally:
        draft.unlink()
    return value, True


def _read(path: Path) -> str:
    if path.stat().st_mode & 0o077:
        os.chmod(path, 0o600)  # someone loosened it: a secret is its owner's alone
    value = path.read_text().strip()
    if not value:  # truncated by hand
        raise ValueError(f"{path} is empty: delete it and Conclave generates a new one")
    return value
